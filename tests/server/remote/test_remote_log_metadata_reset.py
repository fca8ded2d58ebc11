"""A broker with no replica of a ``__remote_log_metadata`` partition reads it from its leader
as Kafka's metadata consumer does (``auto.offset.reset=earliest``): when its position is out
of the leader's range (the partition's log deleted and made again, so it is past the end),
it reads again from the leader's earliest offset and rebuilds the caches of the user
partitions that metadata partition holds from there, instead of failing every attempt.

The leader is a real one-broker ReplicaManager whose metadata log is read as its Fetch
handler reads it (committed records only; OFFSET_OUT_OF_RANGE past the end)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import cast

import pytest

from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC
from tidelog.records.builder import build_batch
from tidelog.server.coordinator.partition_writer import PartitionWriter
from tidelog.server.remote_log_metadata_forwarder import FetchOffsetOutOfRange, MetadataForwarder
from tidelog.server.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from tidelog.server.replica_manager import ReplicaManager
from tidelog.storage.errors import OffsetOutOfRangeError
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_serde import serialize
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS, open_tiered

METADATA_TP = TopicPartition(REMOTE_LOG_METADATA_TOPIC, 0)
TIP = TopicIdPartition(uuid.UUID("5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"), "tiered", 0)
LEADER = 2


class LeaderReads:
    """The forwarder's reads, answered from the leader's real metadata log as its Fetch
    and ListOffsets handlers answer them."""

    broker_id = 1

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.fetches: list[int] = []

    def leader(self, tp: TopicPartition) -> int:
        return LEADER

    def hosted(self, tp: TopicPartition) -> bool:
        return False

    async def fetch(self, tp: TopicPartition, offset: int) -> tuple[bytes, int]:
        self.fetches.append(offset)
        lg = self.rm.get_log(tp)
        assert lg is not None
        try:
            info = lg.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
        except OffsetOutOfRangeError as exc:
            raise FetchOffsetOutOfRange(f"fetching {tp} at {offset}: OFFSET_OUT_OF_RANGE") \
                from exc
        data = info.records.read() if info.records is not None else b""
        return data, lg.high_watermark

    async def earliest_offset(self, tp: TopicPartition) -> int:
        lg = self.rm.get_log(tp)
        assert lg is not None
        return lg.log_start_offset


def copied(end_offset: int) -> list[bytes]:
    """The two events of one finished copy of a segment ending at ``end_offset``."""
    segment_id = RemoteLogSegmentId.generate_new(TIP)
    started = RemoteLogSegmentMetadata(segment_id, end_offset - 9, end_offset, START_MS, LEADER,
                                       START_MS, {0: end_offset - 9}, 1000)
    finished = RemoteLogSegmentMetadataUpdate(segment_id, START_MS, None,
                                              RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                              LEADER)
    return [serialize(started), serialize(finished)]


def write(rm: ReplicaManager, events: list[bytes]) -> None:
    for value in events:
        rm.append(METADATA_TP, build_batch([(0, None, value)]), required_acks=1)


def test_a_position_past_the_leaders_end_resets_to_the_earliest_and_rebuilds(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", create=False)
    try:
        rm = t.rm
        rm.create_topic(REMOTE_LOG_METADATA_TOPIC, 1, {})
        reads = LeaderReads(rm)
        rlmm = TopicBasedRemoteLogMetadataManager(
            appender=cast(PartitionWriter, None), get_log=lambda tp: None, num_partitions=1,
            ensure_topic=lambda: asyncio.sleep(0, True),
            forwarder=cast(MetadataForwarder, reads))
        write(rm, copied(9) + copied(19) + copied(29))

        def ends() -> list[int]:
            cache = asyncio.run(rlmm.refresh(TIP))
            return sorted(m.end_offset for m in cache.list_remote_log_segments())

        assert ends() == [9, 19, 29]
        assert rlmm.consumed[0] == 6
        rm.delete_topic(REMOTE_LOG_METADATA_TOPIC)  # made again: 2 records, below 6
        rm.create_topic(REMOTE_LOG_METADATA_TOPIC, 1, {})
        write(rm, copied(39))
        with caplog.at_level(logging.WARNING):
            assert ends() == [39]  # the old log's segments gone, the new one's read
        assert rlmm.consumed[0] == 2
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "offset 6 is out of range" in warnings[0], warnings
        reads.fetches.clear()
        write(rm, copied(49))
        assert ends() == [39, 49]  # and it goes on from there
        assert reads.fetches[0] == 2
    finally:
        t.close()
