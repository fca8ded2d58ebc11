"""Run aiokafka's own test suite against a fresh ``tidelog serve`` (or a cluster).

    python compat/aiokafka/run.py --tests DIR [--brokers N] [--logs DIR] [extra pytest args]

``DIR`` is aiokafka's ``tests/`` at the tag of the installed release (``v0.14.0``): neither
its PyPI sdist nor its wheel ships the tests, so they come from a checkout of
github.com/aio-libs/aiokafka (``git archive v0.14.0 tests``). The directory is copied to a
temp dir, its ``conftest.py`` replaced by the one here (an external broker instead of
docker), and pytest runs it with ``KAFKA_URI`` and ``KAFKA_VERSION`` set. The broker or
cluster is the kafka-python run's (``compat/kafka_python/run.py``), with aiokafka's docker
settings: broker id 0 and two partitions per topic. pytest runs with aiokafka's own settings
(``asyncio_mode=auto``, its ``ssl`` marker), so it needs what aiokafka's CI installs beside
pytest: pytest-asyncio and pytest-mock (``tests/coordinator``). SIGTERM stops the brokers and
ZooKeeper.

The brokers' logs are kept, one file per broker (``broker-<id>.log``, every start of it), in
``--logs DIR`` or else a new directory under the temp dir; its path is printed at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kafka_python"))

import run as kafka_python_run  # noqa: E402  (compat/kafka_python/run.py)

# aiokafka's docker image: broker.id 0, NUM_PARTITIONS 2
kafka_python_run.BROKER_SETTINGS = {
    "num.partitions": "2",
    "offsets.topic.num.partitions": "2",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}
KAFKA_VERSION = "4.1.0"
SSL_MARKER = "ssl: Tests that require SSL certificates to run"  # aiokafka's pyproject.toml


def keep_logs(broker: kafka_python_run.Broker | kafka_python_run.Cluster, logs: Path) -> None:
    """Each broker's whole log in ``logs`` (the one-broker run's is broker 0's)."""
    logs.mkdir(parents=True, exist_ok=True)
    if isinstance(broker, kafka_python_run.Cluster):
        for b in broker.cluster.brokers.values():
            (logs / f"broker-{b.broker_id}.log").write_text("".join(b.all_output))
    else:
        (logs / "broker-0.log").write_text("".join(broker.lines))
    sys.stderr.write(f"broker logs: {logs}\n")


def main(argv: list[str]) -> int:
    tests, argv = kafka_python_run.tests_arg(
        argv, "aiokafka's tests/ at the installed release's tag")
    size, argv = kafka_python_run.split_args(argv)
    logs, argv = kafka_python_run.take(argv, "--logs")
    logs_dir = Path(logs) if logs else Path(tempfile.mkdtemp(prefix="tidelog-aiokafka-logs-"))
    with tempfile.TemporaryDirectory(prefix="tidelog-aiokafka-") as tmp:
        work = Path(tmp) / "suite"
        shutil.copytree(tests, work / "tests")
        shutil.copy(HERE / "conftest.py", work / "tests" / "conftest.py")
        broker: kafka_python_run.Broker | kafka_python_run.Cluster
        if size > 1:
            broker = kafka_python_run.Cluster(size)
        else:
            kafka_python_run.BROKER_SETTINGS["broker.id"] = "0"
            broker = kafka_python_run.Broker(Path(tmp) / "data")
        env = {**os.environ, "KAFKA_URI": f"PLAINTEXT://127.0.0.1:{broker.port}",
               "KAFKA_VERSION": KAFKA_VERSION}
        try:
            rc = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                 "-o", "addopts=--timeout=120", "-o", "asyncio_mode=auto",
                 "-o", f"markers={SSL_MARKER}", "-q", "-rfEs", "tests", *argv],
                cwd=work, env=env, check=False,
            ).returncode
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            broker.stop()
            keep_logs(broker, logs_dir)
        return kafka_python_run.report(broker, rc)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, kafka_python_run.on_sigterm)
    sys.exit(main(sys.argv[1:]))
