"""Run kafka-python's own integration suite against a fresh ``tidelog serve``.

    python compat/kafka_python/run.py [--brokers N] [extra pytest args]

1. ``pip download --no-binary :all: --no-deps kafka-python==<installed version>``: the PyPI
   sdist ships ``test/integration``. It is fetched at run time (cached in the system temp
   dir), never committed. The sdist leaves out ``test/__init__.py`` and ``test/service.py``;
   the first is created empty, the second replaced by ``service.py`` here (external broker
   only).
2. ``tidelog serve`` in a temp dir on a free port taken as kafka-python's fixture takes one
   (bind to port 0, release, use), named in both ``listeners`` and ``advertised.listeners``
   as its Kafka 4.x template does, with the broker settings of kafka-python's own test
   template (servers/resources/default/kafka.properties): 4 partitions per topic, 2
   offsets-topic partitions, group.min.session.timeout.ms=1000, no initial rebalance delay.
3. pytest on ``test/integration`` with ``KAFKA_URI=PLAINTEXT://host:port`` and
   ``KAFKA_VERSION`` at the Kafka level tidelog speaks, the plugin here marking the tests
   ``allowlist.py`` names. Exit status: pytest's, or 3 if a broker logged an ERROR.

With ``--brokers N`` (N > 1) step 2 starts a cluster instead: a ZooKeeper server and N
``tidelog serve`` processes (``tidelog.testing.EmbeddedCluster``) with the same settings plus
``CLUSTER_SETTINGS`` (every topic, ``__consumer_offsets`` included, on three replicas, two of
them in sync for an acks=all write); ``KAFKA_URI`` names the first broker, the suite creates its
topics with three replicas (``TIDELOG_COMPAT_REPLICAS``) and skips the tests that assume one
broker (``allowlist.CLUSTER_SKIP``). SIGTERM stops the brokers and ZooKeeper before exiting.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path

from tidelog.testing import EmbeddedCluster

HERE = Path(__file__).resolve().parent
KAFKA_VERSION = "4.2.0"  # the API level tidelog advertises (ListOffsets v11: 4.2); the suite gates tests on it
BROKER_SETTINGS = {
    "num.partitions": "4",
    "offsets.topic.num.partitions": "2",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    # kafka-python's fixture (_acl_config for Kafka >= 4.0) runs its broker with Kafka's
    # StandardAuthorizer, everyone allowed while no ACL matches
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

# added in cluster mode (--brokers N, N > 1)
CLUSTER_SETTINGS = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "min.insync.replicas": "2",
}


def sdist_dir(cache: Path) -> Path:
    """The extracted kafka-python sdist matching the installed client, prepared to run."""
    v = version("kafka-python")
    root = cache / f"kafka_python-{v}"
    if not (root / "test" / "integration").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             "--quiet", f"kafka-python=={v}", "-d", str(cache)],
            check=True,
        )
        with tarfile.open(cache / f"kafka_python-{v}.tar.gz") as tar:
            tar.extractall(cache, filter="data")
    (root / "test" / "__init__.py").touch()
    (root / "test" / "service.py").write_text((HERE / "service.py").read_text())
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, log_dir: Path) -> None:
        url = f"PLAINTEXT://127.0.0.1:{free_port()}"
        cmd = [sys.executable, "-m", "tidelog.cli.main", "serve",
               "--override", f"listeners={url}", "--override", f"advertised.listeners={url}",
               "--override", f"log.dirs={log_dir}"]
        for k, v in BROKER_SETTINGS.items():
            cmd += ["--override", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.port = 0
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "listening on" in line:
                self.port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        else:
            raise RuntimeError("tidelog serve exited:\n" + "".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(60)

    def errors(self) -> list[str]:
        return [line for line in self.lines if " ERROR " in line]


class CompatCluster(EmbeddedCluster):
    """Each broker on a port chosen here and named in ``listeners`` and
    ``advertised.listeners``, as in the one-broker run (the suite checks that
    ``advertised.listeners`` is a STATIC_BROKER_CONFIG)."""

    def broker_props(self, broker_id: int) -> dict[str, str]:
        url = f"PLAINTEXT://127.0.0.1:{free_port()}"
        return {**super().broker_props(broker_id), "listeners": url, "advertised.listeners": url}


class Cluster:
    """ZooKeeper and ``size`` brokers; the same surface as :class:`Broker` for ``main``."""

    def __init__(self, size: int) -> None:
        config = {**BROKER_SETTINGS, **CLUSTER_SETTINGS}
        self.cluster = CompatCluster(brokers=size, config=config).start()
        self.port = self.cluster.brokers[1].port
        self.lines: list[str] = []

    def stop(self) -> int:
        rcs = [b.stop() for b in self.cluster.brokers.values()]
        for b in self.cluster.brokers.values():
            self.lines += [f"[broker {b.broker_id}] {line}" for line in b.output]
        self.cluster.stop()
        return next((rc for rc in rcs if rc != 0), 0)

    def errors(self) -> list[str]:
        """ERROR lines, each with the traceback lines that follow it."""
        out: list[str] = []
        in_error = False
        for line in self.lines:
            text = line.split("] ", 1)[1] if line.startswith("[broker ") else line
            if " ERROR " in text:
                in_error = True
            elif text[:2].isdigit():  # the next timestamped log line
                in_error = False
            if in_error:
                out.append(line)
        return out


def split_args(argv: list[str]) -> tuple[int, list[str]]:
    """``--brokers N`` (or ``--brokers=N``) and the rest, which go to pytest."""
    brokers, rest = 1, []
    args = iter(argv)
    for arg in args:
        if arg == "--brokers":
            brokers = int(next(args))
        elif arg.startswith("--brokers="):
            brokers = int(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return brokers, rest


def take(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """The value of ``flag VALUE`` in ``argv`` (None without it) and the other arguments."""
    value, rest = None, []
    args = iter(argv)
    for arg in args:
        if arg == flag:
            value = next(args)
        else:
            rest.append(arg)
    return value, rest


def tests_arg(argv: list[str], what: str) -> tuple[Path, list[str]]:
    """``--tests DIR`` (another client's suite, ``what``) and the other arguments: the
    runners of compat/ that take a checkout of a client's tests."""
    tests, rest = take(argv, "--tests")
    if tests is None:
        raise SystemExit(f"--tests DIR ({what})")
    return Path(tests), rest


def report(broker: Broker | Cluster, rc: int) -> int:
    """The suite's exit code, or 3 when it passed but a broker logged an ERROR (printed)."""
    errors = broker.errors()
    if errors:
        sys.stderr.write(f"tidelog logged {len(errors)} errors:\n" + "".join(errors[:80]))
        return rc or 3
    return rc


def on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM stops the run as Ctrl-C does: the brokers and ZooKeeper are stopped on the way
    out (ZooKeeper runs in its own session, so nothing else would end it). A second SIGTERM
    during that cleanup is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)


def run_suite(root: Path, tmp: Path, broker: Broker | Cluster, size: int, argv: list[str]) -> int:
    kafka_root = tmp / "kafka-bin"  # the suite wants it to exist; never used
    kafka_root.mkdir()
    env = {
        **os.environ,
        "KAFKA_URI": f"PLAINTEXT://127.0.0.1:{broker.port}",
        "KAFKA_VERSION": KAFKA_VERSION,
        "KAFKA_ROOT": str(kafka_root),
        "PYTHONPATH": os.pathsep.join([str(root), str(HERE)]),
    }
    env["TIDELOG_COMPAT_BROKERS"] = str(size)
    if size > 1:
        env["TIDELOG_COMPAT_REPLICAS"] = CLUSTER_SETTINGS["default.replication.factor"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tidelog_compat_plugin",
         "-p", "no:cacheprovider", "-o", "addopts=--timeout=120",
         "-o", "log_level=WARNING", "-q", "-rsxX", "test/integration", *argv],
        cwd=root, env=env, check=False,
    ).returncode


def main(argv: list[str]) -> int:
    size, argv = split_args(argv)
    cache = Path(os.environ.get("TIDELOG_COMPAT_CACHE",
                                Path(tempfile.gettempdir()) / "tidelog-compat-cache"))
    root = sdist_dir(cache)
    with tempfile.TemporaryDirectory(prefix="tidelog-compat-") as tmp:
        broker: Broker | Cluster = Cluster(size) if size > 1 else Broker(Path(tmp) / "data")
        try:
            rc = run_suite(root, Path(tmp), broker, size, argv)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            stop_rc = broker.stop()
        if os.environ.get("TIDELOG_COMPAT_BROKER_LOG"):  # the brokers' whole log, for a look
            Path(os.environ["TIDELOG_COMPAT_BROKER_LOG"]).write_text("".join(broker.lines))
        if broker.errors():
            return report(broker, rc)
        if stop_rc != 0:
            sys.stderr.write(f"tidelog serve exited {stop_rc}\n" + "".join(broker.lines[-30:]))
            return rc or 3
        return rc


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_sigterm)
    sys.exit(main(sys.argv[1:]))
