"""``rlmm.config.remote.log.metadata.topic.replication.factor`` (default 3, as Kafka's) on a
ZooKeeper cluster of two brokers: ``__remote_log_metadata`` cannot be created, so tiering
waits; each broker says why in one log line (the config, the live broker count, the fix),
not once per partition, and ``/metrics`` shows ``tidelog_remote_log_metadata_topic_ready 0``.
A third broker joins: the topic is created with three replicas, the gauge turns 1 and the
closed segments reach the bucket (a real S3 server, SeaweedFS)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest

from tidelog.testing import EmbeddedCluster
from tidelog.testing.cluster import BrokerProcess
from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "tiered"
RF_CONFIG = "rlmm.config.remote.log.metadata.topic.replication.factor"
DEADLINE_S = 90.0


def _wait(what: str, ok: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _http_url(b: BrokerProcess) -> str:
    for line in list(b.output):
        if "HTTP listener on " in line:
            return line.split("HTTP listener on ", 1)[1].split()[0].rstrip(",")
    raise AssertionError("no HTTP listener line")


def _ready_gauge(b: BrokerProcess) -> float:
    text = urllib.request.urlopen(_http_url(b) + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith("tidelog_remote_log_metadata_topic_ready "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no tidelog_remote_log_metadata_topic_ready on /metrics")


def _waiting_lines(b: BrokerProcess) -> list[str]:
    return [line for line in list(b.output) if "tiered storage is waiting" in line]


def test_too_few_brokers_for_the_metadata_topic_is_said_then_healed(
        s3_server: SeaweedFS, s3_bucket: S3Bucket) -> None:
    props = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        **s3_bucket.rsm_configs,
        "remote.log.manager.task.interval.ms": "200",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "http.listeners": "http://127.0.0.1:0",
    }
    s3 = s3_server.client()

    def objects() -> list[str]:
        listed = s3.list_objects_v2(Bucket=s3_bucket.name).get("Contents", [])
        return [o["Key"] for o in listed]

    with EmbeddedCluster(2, props) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(TOPIC, 2, 2, config={
            "remote.storage.enable": "true", "segment.bytes": "2048", "retention.ms": "-1",
            "local.retention.bytes": "1"})
        admin.create_topics([topic])[TOPIC].result(30)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                "acks": "all", "linger.ms": 0})
        for i in range(60):  # many closed segments on both partitions: all acknowledged
            producer.produce(TOPIC, value=b"%06d" % i + b"v" * 200, partition=i % 2)
            producer.flush(30)
        b1, b2 = cluster.brokers[1], cluster.brokers[2]
        _wait("the waiting line", lambda: bool(_waiting_lines(b1) and _waiting_lines(b2)))
        line = _waiting_lines(b1)[0]
        assert f"{RF_CONFIG}=3" in line, line
        assert "2 are live" in line, line
        assert f"set {RF_CONFIG}=2" in line and "start 1 more broker" in line, line
        assert " WARNING " in line or "WARN" in line, line
        assert _ready_gauge(b1) == 0 and _ready_gauge(b2) == 0
        assert objects() == []  # nothing tiered while it waits
        task_failures = [x for x in b1.output if "remote log task of" in x]
        assert task_failures == []  # one line per broker, not one per partition and pass
        assert len(_waiting_lines(b1)) == 1  # and not at every retry (LOG_EVERY_MS)

        assert cluster.directory is not None
        cluster.brokers[3] = BrokerProcess(3, cluster.directory / "broker-3",
                                           cluster.broker_props(3)).start()
        _wait("the gauge turning 1", lambda: _ready_gauge(b1) == 1 and _ready_gauge(b2) == 1)
        _wait("segments in the bucket",
              lambda: sum(k.endswith(".log") for k in objects()) >= 4)
        desc = admin.describe_topics(
            ck.TopicCollection(["__remote_log_metadata"]))["__remote_log_metadata"].result(30)
        assert {len(p.replicas) for p in desc.partitions} == {3}
