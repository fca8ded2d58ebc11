"""Tiered storage on three broker processes (ZooKeeper): every partition's leader copies its
closed segments, writing ``__remote_log_metadata`` partitions led by any broker (produced
to their leader when not led here); after the SIGKILL of a partition's leader the new leader
continues where the old one stopped: the metadata (read back with kafka-python) lists no
offset range twice as finished and leaves no gap. The killed broker comes back with empty
partitions (a replaced disk), behind its leaders' local starts: it builds each replica's
state from remote storage (OFFSET_MOVED_TO_TIERED_STORAGE) and rejoins the ISR."""

from __future__ import annotations

import shutil
import time
from itertools import pairwise
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)
from tidelog.storage.remote.metadata_serde import deserialize
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

TOPIC = "tiered"
PARTITIONS = 3
DEADLINE_S = 90.0


def _props(remote: Path) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class":
            "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
        "rsm.config.storage.root": str(remote),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "log.initial.task.delay.ms": "0",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
        "offsets.topic.replication.factor": "3",
    }


def _produce(bootstrap: str, n: int, start: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True})
    for i in range(start, start + n):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"%06d" % i + b"v" * 194,
                         partition=i % PARTITIONS)
        if i % 10 == 9:
            producer.flush(30)
    assert producer.flush(30) == 0


def _finished(bootstrap: str) -> dict[int, list[RemoteLogSegmentMetadata]]:
    """Each partition's COPY_SEGMENT_FINISHED (and not deleted) segments, by start offset."""
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        parts = consumer.partitions_for_topic("__remote_log_metadata") or set()
        consumer.assign([kafka.TopicPartition("__remote_log_metadata", p) for p in parts])
        consumer.seek_to_beginning()
        events = [deserialize(rec.value) for rec in consumer]
    finally:
        consumer.close()
    segments = {e.remote_log_segment_id: e for e in events
                if isinstance(e, RemoteLogSegmentMetadata)}
    state: dict[object, RemoteLogSegmentState] = {}
    for e in events:
        if isinstance(e, RemoteLogSegmentMetadataUpdate):
            state[e.remote_log_segment_id] = e.state
    out: dict[int, list[RemoteLogSegmentMetadata]] = {p: [] for p in range(PARTITIONS)}
    for sid, m in segments.items():
        if state.get(sid) is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            out[m.topic_id_partition.partition].append(m)
    return {p: sorted(ms, key=lambda m: m.start_offset) for p, ms in out.items()}


def _wait_copied(bootstrap: str, at_least: int) -> dict[int, list[RemoteLogSegmentMetadata]]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        finished = _finished(bootstrap)
        if all(len(ms) >= at_least for ms in finished.values()):
            return finished
        if time.monotonic() > deadline:
            raise AssertionError(f"not copied: { {p: len(m) for p, m in finished.items()} }")
        time.sleep(0.5)


def _check_no_duplicate_no_gap(finished: dict[int, list[RemoteLogSegmentMetadata]]) -> None:
    for p, segments in finished.items():
        starts = [m.start_offset for m in segments]
        assert len(starts) == len(set(starts)), (p, starts)
        assert segments[0].start_offset == 0, p
        for a, b in pairwise(segments):
            assert b.start_offset <= a.end_offset + 1, (p, a, b)  # no gap
            assert b.end_offset > a.end_offset, (p, a, b)  # nothing listed twice


def test_tiering_on_three_brokers_survives_a_leader_kill(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    remote.mkdir()
    with EmbeddedCluster(3, _props(remote)) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(TOPIC, PARTITIONS, 3, config={
            "remote.storage.enable": "true", "segment.bytes": "2048", "retention.ms": "-1",
            "local.retention.bytes": "1", "min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        _produce(cluster.bootstrap_servers, 150, 0)
        before = _wait_copied(cluster.bootstrap_servers, 3)
        _check_no_duplicate_no_gap(before)
        tp = TopicPartition(TOPIC, 0)
        leader = int(cluster.zk.get_topic_partition_states([tp])[tp].leader)
        cluster.kill(leader)  # SIGKILL: its copies in flight are cut
        _produce(cluster.bootstrap_servers, 150, 150)
        after = _wait_copied(cluster.bootstrap_servers, len(before[0]) + 3)
        _check_no_duplicate_no_gap(after)
        for p in range(PARTITIONS):  # what was finished stays finished
            assert {m.remote_log_segment_id for m in before[p]} <= \
                {m.remote_log_segment_id for m in after[p]}
        assert cluster.directory is not None
        broker_dir = cluster.directory / f"broker-{leader}"
        for d in broker_dir.glob(f"{TOPIC}-*"):
            shutil.rmtree(d)  # a replaced disk: its tiered replicas start empty
        cluster.start_broker(leader, timeout=DEADLINE_S)
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + DEADLINE_S
        while True:
            states = cluster.zk.get_topic_partition_states(tps)
            if all(leader in states[tp].isr for tp in tps):
                break
            assert time.monotonic() < deadline, f"not back in the ISR: {states}"
            time.sleep(0.5)
        for tp in tps:  # built from remote storage: its local log starts after offset 0
            bases = [int(f.name[:20]) for f in (broker_dir / f"{TOPIC}-{tp.partition}")
                     .glob("*.log")]
            assert bases and min(bases) > 0, (tp, bases)
