"""A broker with no replica of a ``__remote_log_metadata`` partition reads it from its leader
as Kafka's metadata consumer does (``auto.offset.reset=earliest``): when its position is out
of the leader's range (the partition's log deleted and made again, so it is past the end),
it reads again from the leader's earliest offset and rebuilds the caches of the user
partitions that metadata partition holds from there, instead of failing every attempt.

Over the real wire: a broker in process leads ``__remote_log_metadata``; the reader, another
broker id with no replica, reads it with Fetch (OFFSET_OUT_OF_RANGE past the end) and asks
ListOffsets for the earliest offset."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC
from tidelog.records.builder import build_batch
from tidelog.server.remote_log_metadata_forwarder import FetchOffsetOutOfRange, MetadataForwarder
from tidelog.server.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_serde import serialize
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS

METADATA_TP = TopicPartition(REMOTE_LOG_METADATA_TOPIC, 0)
TIP = TopicIdPartition(uuid.UUID("5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"), "tiered", 0)
READER = 99  # the reading broker: not the leader, no replica of the metadata partition


def copied(end_offset: int) -> list[bytes]:
    """The two events of one finished copy of a segment ending at ``end_offset``."""
    segment_id = RemoteLogSegmentId.generate_new(TIP)
    started = RemoteLogSegmentMetadata(segment_id, end_offset - 9, end_offset, START_MS, 1,
                                       START_MS, {0: end_offset - 9}, 1000)
    finished = RemoteLogSegmentMetadataUpdate(segment_id, START_MS, None,
                                              RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1)
    return [serialize(started), serialize(finished)]


def test_a_position_past_the_leaders_end_resets_to_the_earliest_and_rebuilds(
        caplog: pytest.LogCaptureFixture) -> None:
    with EmbeddedBroker() as b:
        rm = b.broker.replica_manager

        async def write(events: list[bytes], create: bool = False) -> None:
            if create:
                rm.create_topic(REMOTE_LOG_METADATA_TOPIC, 1, {})
            for value in events:
                rm.append(METADATA_TP, build_batch([(0, None, value)]), required_acks=1)

        async def delete() -> None:
            rm.delete_topic(REMOTE_LOG_METADATA_TOPIC)

        async def read() -> None:
            forwarder = MetadataForwarder(READER, rm.metadata_cache, "PLAINTEXT", None,
                                          lambda tp: None, timeout_ms=10_000)
            rlmm = TopicBasedRemoteLogMetadataManager(
                appender=None, get_log=lambda tp: None,  # type: ignore[arg-type]
                num_partitions=1, ensure_topic=lambda: asyncio.sleep(0, True),
                forwarder=forwarder)

            async def ends() -> list[int]:
                cache = await rlmm.refresh(TIP)
                return sorted(m.end_offset for m in cache.list_remote_log_segments())

            try:
                assert await ends() == [9, 19, 29]
                assert rlmm.consumed[0] == 6
                b.run(delete())  # made again: 2 records, its end below 6
                b.run(write(copied(39), create=True))
                with pytest.raises(FetchOffsetOutOfRange):  # what the leader answers
                    await forwarder.fetch(METADATA_TP, 6)
                with caplog.at_level(logging.WARNING):
                    assert await ends() == [39]  # the old log's segments gone
                assert rlmm.consumed[0] == 2
                warnings = [r.getMessage() for r in caplog.records
                            if r.levelno >= logging.WARNING]
                assert len(warnings) == 1 and "offset 6 is out of range" in warnings[0]
                b.run(write(copied(49)))
                assert await ends() == [39, 49]  # and it goes on from there
                assert rlmm.consumed[0] == 4
            finally:
                await forwarder.close()

        b.run(write(copied(9) + copied(19) + copied(29), create=True))
        asyncio.run(read())
