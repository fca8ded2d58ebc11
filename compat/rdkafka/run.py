"""Run librdkafka's own test suite against ``tidelog serve`` (one broker, or three and ZooKeeper).

    python compat/rdkafka/run.py --tests DIR [--brokers N] [test-runner args]

``DIR`` is a built librdkafka tree (``git archive`` of github.com/confluentinc/librdkafka,
``./configure && make libs && make -C tests test-runner``): no wheel or package ships the
suite, so no test of the default command runs it. Its ``tests/test-runner`` runs against the
cluster named in ``tests/test.conf``; this script writes that file for the brokers it starts
(and restores the old one after), with the broker settings of librdkafka's own trivup
cluster (``tests/cluster_testing.py`` and ``scenarios/default.json``): auto-created topics,
four partitions, a replication factor of min(brokers, 3) (``__share_group_state``'s too), a
rack per broker and the rack-aware replica selector, and ACLs (``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found``, as its ACL tests need). Broker ids are 1..N, each on a
free port of 127.0.0.1. The few tests that run Kafka's ``kafka-topics.sh`` and
``kafka-acls.sh`` (``KAFKA_PATH``) get tidelog's ``topics`` and ``acls`` commands instead.

Arguments other than ``--tests`` and ``--brokers`` go to ``test-runner`` (default
``-Q -L -K -E -p2``: quick mode, broker tests only, no known issues, no sockem, two at a
time; ``-l`` runs the tests that need no broker). ``TESTS``, ``TESTS_SKIP`` and
``SUBTESTS`` in the environment pick tests as in librdkafka's README; ``TEST_KAFKA_VERSION``
defaults to the Kafka release tidelog speaks (4.1.0). SIGTERM stops the brokers and ZooKeeper.
``TIDELOG_COMPAT_BROKER_LOG=<file>`` writes the brokers' whole log there; a broker ERROR
line fails the run, as in the kafka-python run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import tidelog
from tidelog.testing import EmbeddedCluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kafka_python"))

import run as kafka_python_run  # compat/kafka_python/run.py

KAFKA_VERSION = "4.1.0"
DEFAULT_ARGS = ["-Q", "-L", "-K", "-E", "-p2"]
# tests that cannot apply here, skipped unless TESTS_SKIP names its own (compat/FINDINGS.md)
CANNOT_APPLY = {
    "0098": "its transactions come from a Java producer (TransactionProducerCli, built "
            "with javac against the jars of a Kafka tree in KAFKA_PATH)",
}


def settings(brokers: int) -> dict[str, str]:
    """trivup's broker settings for librdkafka's suite (scenario ``default``)."""
    replicas = str(min(brokers, 3))
    return {
        "auto.create.topics.enable": "true",
        "num.partitions": "4",
        "default.replication.factor": replicas,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": str(min(brokers, 2)),
        # its settings for the share consumer tests (KIP-932, Kafka 4.2+)
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": str(min(brokers, 2)),
        "group.share.min.record.lock.duration.ms": "1000",
        "group.initial.rebalance.delay.ms": "3000",  # Kafka's default, as trivup leaves it
        "replica.selector.class":
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }


def kafka_path(directory: Path) -> Path:
    """A ``KAFKA_PATH`` whose ``bin/kafka-topics.sh`` and ``bin/kafka-acls.sh`` are tidelog's
    ``topics`` and ``acls`` commands (the same options), for the tests that run them."""
    root = Path(tidelog.__file__).resolve().parent.parent  # the tidelog this script runs
    for script, command in (("kafka-topics.sh", "topics"), ("kafka-acls.sh", "acls")):
        path = directory / "bin" / script
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" '
                        f'-m tidelog.cli.main {command} "$@"\n')
        path.chmod(0o755)
    return directory


class RdkafkaCluster(EmbeddedCluster):
    def __init__(self, brokers: int) -> None:
        super().__init__(brokers=brokers, config=settings(brokers))

    def broker_props(self, broker_id: int) -> dict[str, str]:
        return {**super().broker_props(broker_id), "broker.rack": f"RACK{broker_id}"}


def split_args(argv: list[str]) -> tuple[Path, int, list[str]]:
    """``--tests DIR``, ``--brokers N`` (3) and the test-runner's arguments."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--tests", type=Path, required=True,
                        help="a librdkafka tree with tests/test-runner built")
    parser.add_argument("--brokers", type=int, default=3)
    known, rest = parser.parse_known_args(argv)
    return known.tests, known.brokers, rest or list(DEFAULT_ARGS)


class Brokers(kafka_python_run.Cluster):
    """The kafka-python run's cluster surface (stop, the brokers' lines, their ERRORs) over
    librdkafka's broker settings, with one broker or more."""

    def __init__(self, size: int) -> None:  # not super().__init__: it starts its own cluster
        self.cluster = RdkafkaCluster(size).start()
        self.port = self.cluster.brokers[1].port
        self.lines: list[str] = []


def run_suite(tests: Path, cluster: EmbeddedCluster, argv: list[str]) -> int:
    conf = tests / "tests" / "test.conf"
    saved = conf.read_bytes() if conf.exists() else None
    conf.write_text(f"bootstrap.servers={cluster.bootstrap_servers}\n")
    libs = [str(tests / "src"), str(tests / "src-cpp"), os.environ.get("LD_LIBRARY_PATH", "")]
    tools = Path(tempfile.mkdtemp(prefix="tidelog-rdkafka-"))
    env = {"TEST_KAFKA_VERSION": KAFKA_VERSION, **os.environ,
           "LD_LIBRARY_PATH": ":".join(filter(None, libs)),  # as its run-test.sh sets it
           "KAFKA_PATH": str(kafka_path(tools)), "BROKERS": cluster.bootstrap_servers}
    env.setdefault("TESTS_SKIP", ",".join(CANNOT_APPLY))
    try:
        return subprocess.run(
            ["./test-runner", *argv], cwd=tests / "tests", env=env, check=False
        ).returncode
    finally:
        shutil.rmtree(tools, ignore_errors=True)
        if saved is None:
            conf.unlink()
        else:
            conf.write_bytes(saved)


def main(argv: list[str]) -> int:
    tests, size, argv = split_args(argv)
    brokers = Brokers(size)
    try:
        rc = run_suite(tests, brokers.cluster, argv)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_rc = brokers.stop()
        if os.environ.get("TIDELOG_COMPAT_BROKER_LOG"):
            Path(os.environ["TIDELOG_COMPAT_BROKER_LOG"]).write_text("".join(brokers.lines))
    return kafka_python_run.report(brokers, rc) or (3 if stop_rc else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, kafka_python_run.on_sigterm)
    sys.exit(main(sys.argv[1:]))
