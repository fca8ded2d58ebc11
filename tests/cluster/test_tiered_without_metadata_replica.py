"""Tiering on brokers that host no replica of ``__remote_log_metadata`` (three brokers on
ZooKeeper, a real S3 server): the metadata topic has one partition and one replica, on broker
X; a tiered partition is led by Y and followed by Z, neither of them X. Y writes its remote
segment events to X and reads them back as Kafka's metadata consumer does, so it copies
(objects in the bucket, COPY_SEGMENT_FINISHED read back with kafka-python), serves a
consumer from offset 0 once its local segments are gone (librdkafka), and expires remote
segments by ``retention.bytes`` (the log start moves, the objects go). Z, following, tracks
the copies from X too: its local retention drops copied segments."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection

from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from tidelog.storage.remote.metadata_serde import deserialize
from tidelog.testing import EmbeddedCluster
from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

TOPIC = "tiered"
METADATA = "__remote_log_metadata"
DEADLINE_S = 90.0
N = 80


def _wait(what: str, ok: Callable[[], bool], timeout: float = DEADLINE_S,
          state: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what} {state()}"
        time.sleep(0.2)


def _replicas(admin: AdminClient, topic: str) -> list[int]:
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    return [n.id for n in desc.partitions[0].replicas]


def _states(bootstrap: str) -> list[RemoteLogSegmentState]:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=1500)
    try:
        consumer.assign([kafka.TopicPartition(METADATA, 0)])
        consumer.seek_to_beginning()
        events = [deserialize(rec.value) for rec in consumer]
    finally:
        consumer.close()
    return [e.state for e in events if isinstance(e, RemoteLogSegmentMetadataUpdate)]


def _local_bases(part_dir: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in part_dir.glob("*.log"))


def _consume_all(bootstrap: str) -> list[tuple[int, bytes]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "no-meta-replica",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def test_tiering_on_brokers_without_a_metadata_replica(s3_server: SeaweedFS,
                                                       s3_bucket: S3Bucket) -> None:
    props = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        **s3_bucket.rsm_configs,
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "log.initial.task.delay.ms": "0",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
    }
    s3 = s3_server.client()

    def remote_logs() -> list[str]:
        listed = s3.list_objects_v2(Bucket=s3_bucket.name).get("Contents", [])
        return sorted(o["Key"] for o in listed if o["Key"].endswith(".log"))

    with EmbeddedCluster(3, props) as cluster:
        bootstrap = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def metadata_led() -> bool:
            try:
                return len(_replicas(admin, METADATA)) == 1
            except Exception:
                return False

        _wait("__remote_log_metadata created at start-up", metadata_led)
        (x,) = _replicas(admin, METADATA)
        y, z = sorted({1, 2, 3} - {x})
        topic = NewTopic(TOPIC, 1, replica_assignment=[[y, z]], config={
            "remote.storage.enable": "true", "segment.bytes": "2048", "retention.ms": "-1",
            "local.retention.bytes": "1", "min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        for i in range(N):
            producer.produce(TOPIC, value=b"%06d" % i + b"v" * 200, partition=0)
            producer.flush(30)
        assert cluster.directory is not None
        y_dir = cluster.directory / f"broker-{y}" / f"{TOPIC}-0"
        z_dir = cluster.directory / f"broker-{z}" / f"{TOPIC}-0"
        _wait("copies and local retention at the leader", lambda: len(remote_logs()) >= 5
              and _local_bases(y_dir)[0] >= 40,
              state=lambda: f"(copied {remote_logs()}, local {_local_bases(y_dir)})")
        assert not (cluster.directory / f"broker-{y}" / f"{METADATA}-0").exists()
        assert _states(bootstrap).count(RemoteLogSegmentState.COPY_SEGMENT_FINISHED) >= 5
        # a follower log made without the topic's configs never rolls at segment.bytes
        _wait("local retention at the follower", lambda: _local_bases(z_dir)[0] >= 40,
              state=lambda: f"(local {_local_bases(z_dir)}, leader's {_local_bases(y_dir)})")

        got = _consume_all(bootstrap)  # offsets below Y's local start come from S3
        assert got == [(i, b"%06d" % i + b"v" * 200) for i in range(N)]

        before = remote_logs()
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
            ConfigEntry("retention.bytes", "3000",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        _wait("remote segments expired", lambda: len(remote_logs()) <= len(before) - 2)
        watcher = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w"})
        try:
            low, _high = watcher.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
        finally:
            watcher.close()
        assert low > 0  # the log start moved past the expired segments
        states = _states(bootstrap)
        assert states.count(RemoteLogSegmentState.DELETE_SEGMENT_FINISHED) >= 2
        for name, b in cluster.brokers.items():
            errors = [line for line in b.output if " ERROR " in line]
            assert not errors, (name, errors[:5])
