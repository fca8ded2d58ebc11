"""Run confluent-kafka-python's own integration suite against a fresh ``tidelog serve``
with its Schema Registry.

    python compat/confluent_kafka/run.py --tests DIR --python PY [extra pytest args]

``DIR`` is the ``tests/`` of github.com/confluentinc/confluent-kafka-python at the tag of
the installed release (``git archive <tag> tests``; neither its sdist nor its wheel ships
them). ``PY`` is an interpreter with confluent-kafka and the suite's own requirements
(``requirements/requirements-tests-install.txt``: pytest, pytest-asyncio, trivup, the
serializers' extras); the broker runs on the interpreter running this script. The suite takes an existing
cluster from ``BROKERS`` and ``SR_URL`` (its ``ByoFixture``) and starts its own (trivup,
which downloads Kafka) for the rest: the SASL and OAUTHBEARER clusters and a Confluent
Platform 7.0.1 registry, which are deselected here. Its ``ByoFixture`` lacks the
``async_schema_registry`` that the asyncio tests call: the copy run here gets one, the
synchronous one's twin. The broker has the settings of the suite's trivup brokers
(``TestUtils.broker_conf``) and an authorizer that allows what no ACL names. SIGTERM stops
the broker.
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

kafka_python_run.BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.share.record.lock.duration.ms": "1000",
    "group.share.min.record.lock.duration.ms": "1000",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
DESELECT = (  # clusters the suite starts itself (trivup downloads Kafka and CP)
    "tests/integration/admin/test_describe_operations.py::test_describe_operations[sasl_cluster0]",
    "tests/integration/share_consumer_sasl",
    "tests/integration/share_consumer_oauth",
    "tests/integration/schema_registry/_sync/test_api_client.py::"
    "test_api_get_register_schema_invalid[kafka_cluster_cp_7_0_1-500-500]",
    "tests/integration/schema_registry/_async/test_api_client.py::"
    "test_api_get_register_schema_invalid[kafka_cluster_cp_7_0_1-500-500]",
)
ASYNC_REGISTRY = '''

# compat/confluent_kafka/run.py: the asyncio tests' registry for an existing cluster
from confluent_kafka.schema_registry._async.schema_registry_client import (  # noqa: E402
    AsyncSchemaRegistryClient as _AsyncRegistry,
)
from tests.integration.cluster_fixture import ByoFixture as _Byo  # noqa: E402

_Byo.async_schema_registry = lambda self, conf=None: _AsyncRegistry({"url": self._sr_url})
'''


def main(argv: list[str]) -> int:
    python, argv = kafka_python_run.take(argv, "--python")
    tests, argv = kafka_python_run.tests_arg(
        argv, "confluent-kafka-python's tests/ at the installed tag")
    sr_port = kafka_python_run.free_port()
    kafka_python_run.BROKER_SETTINGS["schema.registry.listeners"] = f"http://127.0.0.1:{sr_port}"
    with tempfile.TemporaryDirectory(prefix="tidelog-confluent-") as tmp:
        work = Path(tmp) / "suite"
        shutil.copytree(tests, work / "tests")
        with (work / "tests" / "integration" / "conftest.py").open("a") as f:
            f.write(ASYNC_REGISTRY)
        broker = kafka_python_run.Broker(Path(tmp) / "data")
        env = {**os.environ, "BROKERS": f"127.0.0.1:{broker.port}",
               "SR_URL": f"http://127.0.0.1:{sr_port}"}
        try:
            rc = subprocess.run(
                [python or sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs",
                 "--timeout", "120", "-o", "asyncio_mode=auto", "tests/integration",
                 *(f"--deselect={d}" for d in DESELECT), *argv],
                cwd=work, env=env, check=False,
            ).returncode
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            broker.stop()
        return kafka_python_run.report(broker, rc)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, kafka_python_run.on_sigterm)
    sys.exit(main(sys.argv[1:]))
