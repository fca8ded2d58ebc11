"""Remote segments and the leader-epoch lineage (Kafka's isRemoteSegmentWithinLeaderEpochs),
on a real S3 server (SeaweedFS): a leader at epoch 1 uploads two segments, then loses its
leadership; the new leader's log is truncated below them and written at epoch 2, so the
epoch-1 segments are not in its lineage. They are never read (a fetch at their offsets
reads the epoch-2 copy), not counted by ``retention.bytes`` (the limit set to the lineage's
total minus the first segment deletes exactly that segment), and once retention moves the
log start past epoch 0 they are deleted as unreferenced (their objects gone from the
bucket), while the lineage's epoch-2 segments stay."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatchBuilder
from tidelog.server.remote_log_expiration import only_local_size
from tidelog.server.remote_log_reader import RemoteStorageFetchInfo
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    uuid_to_str,
)
from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS, TOPIC, Tiered, open_tiered, tiered_topic_configs

NEW_MS = START_MS + 10_000_000


@dataclass
class Led:
    """The tiered partition as its leader sees it: the broker's real log, the leader epoch
    set by the test (a leader change)."""

    log: Log
    topic_id: uuid.UUID
    leader_epoch: int
    is_leader: bool = True

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(TOPIC, 0)


def _batch(offset: int, tag: bytes, timestamp: int) -> bytes:
    b = RecordBatchBuilder()
    b.append(timestamp + offset, b"k%d" % offset, tag + b"%06d" % offset + bytes(200))
    return b.build()


def _append(lg: Log, offsets: range, epoch: int, tag: bytes, timestamp: int) -> None:
    for i in offsets:
        assert lg.log_end_offset == i
        lg.append_as_leader(_batch(i, tag, timestamp), leader_epoch=epoch)
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)


def _finished(t: Tiered, tip: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
    return list(t.rlm.rlmm.catch_up_for(tip).list_remote_log_segments())


def _retention(lg: Log, **configs: str) -> None:
    lg.update_config(LogConfig.from_props(tiered_topic_configs(**configs)))


def test_segments_of_a_diverged_epoch_are_not_read_not_counted_and_deleted(
        tmp_path: Path, s3_server: SeaweedFS, s3_bucket: S3Bucket) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "unused", **s3_bucket.rsm_configs)
    s3 = s3_server.client()

    def keys() -> list[str]:
        listed = s3.list_objects_v2(Bucket=s3_bucket.name).get("Contents", [])
        return [o["Key"] for o in listed]

    try:
        lg = t.log()
        info = t.rm.topic(TOPIC)
        assert info is not None and info.topic_id is not None
        led = Led(lg, info.topic_id, 0)
        t.rlm.partitions = lambda: [led]
        tip = TopicIdPartition(info.topic_id, TOPIC, 0)
        _append(lg, range(0, 9), 0, b"lineage", START_MS)
        led.leader_epoch = 1  # a leader at epoch 1 writes and uploads offsets 9-14
        _append(lg, range(9, 15), 1, b"diverged", START_MS)
        t.run()
        diverged = [m for m in _finished(t, tip) if 1 in m.segment_leader_epochs]
        assert len(diverged) >= 2 and {m.start_offset for m in diverged} >= {9}
        lg.truncate_to(9)  # the next leader never had them: its epoch 2 starts at 9
        led.leader_epoch = 2
        _append(lg, range(9, 18), 2, b"lineage", NEW_MS)
        t.run()
        lineage = [m for m in _finished(t, tip) if 1 not in m.segment_leader_epochs]
        assert max(m.end_offset for m in lineage) == 17
        assert {e for m in lineage for e in m.segment_leader_epochs} == {0, 2}

        # a fetch at 9 reads the lineage's copy, and goes on along the lineage
        fetch = RemoteStorageFetchInfo(tip, 9, 1 << 20, True)
        result = asyncio.run(t.rlm.read(fetch, lg))
        assert result.error is None and b"lineage000009" in result.records
        assert b"diverged" not in result.records
        assert [m.start_offset for m in result.segments] == \
            sorted(m.start_offset for m in lineage if m.start_offset >= 9)

        # retention.bytes over the lineage only: exactly its first segment goes
        first = min(lineage, key=lambda m: m.start_offset)
        total = only_local_size(lg) + sum(m.segment_size_in_bytes for m in lineage)
        _retention(lg, **{"retention.bytes": str(total - first.segment_size_in_bytes)})
        t.run()
        left = _finished(t, tip)
        assert {m.remote_log_segment_id for m in left} == \
            {m.remote_log_segment_id for m in [*lineage, *diverged]} - {first.remote_log_segment_id}
        assert lg.log_start_offset == first.end_offset + 1

        # retention.ms past every old timestamp: epoch 0 goes by time, the log start moves
        # to 9 (epoch 2 is then the earliest the leader knows): epoch 1 goes as unreferenced
        _retention(lg, **{"retention.ms": "1000000"})
        t.clock.advance(2_000_000)
        t.run()
        left = _finished(t, tip)
        assert {m.remote_log_segment_id for m in left} == \
            {m.remote_log_segment_id for m in lineage if 2 in m.segment_leader_epochs}
        assert lg.log_start_offset == 9
        gone = {uuid_to_str(m.remote_log_segment_id.id) for m in diverged}
        assert not [k for k in keys() if any(g in k for g in gone)]
        assert t.rlm.metrics.all_topics.remote_delete_errors == 0
    finally:
        t.close()
