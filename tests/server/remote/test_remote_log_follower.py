"""A follower behind its leader's local start builds its state from remote storage (Kafka's
buildRemoteLogAuxState): empty after the remote segment below the leader's local start, the
leader's log start kept below it, the leader-epoch cache and the producer state (an
idempotent producer's last sequence) restored from that segment's remote files."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tidelog.records import RecordBatchBuilder
from tidelog.server.remote_log_follower import build_remote_log_aux_state, parse_epoch_checkpoint
from tidelog.server.remote_log_manager import TieredPartition
from tidelog.server.remote_log_metadata_manager import RemoteLogMetadataError
from tidelog.storage.leader_epoch import EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS, TOPIC, FollowerView, open_tiered

PRODUCER_ID = 4242


def _idempotent(seq: int) -> bytes:
    b = RecordBatchBuilder(producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq)
    b.append(START_MS + seq, None, b"v" * 200)
    return b.build()


def test_parse_epoch_checkpoint() -> None:
    assert parse_epoch_checkpoint(b"0\n2\n0 0\n3 17\n") == [EpochEntry(0, 0), EpochEntry(3, 17)]


def test_a_follower_behind_the_local_start_starts_from_remote_state(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote")
    try:
        tp = TopicPartition(TOPIC, 0)
        for seq in range(20):
            t.rm.append(tp, _idempotent(seq), required_acks=1)
        t.run()
        leader = t.log()
        assert leader.delete_old_segments() > 0
        local_start = leader.local_log_start_offset
        info = t.rm.topic(TOPIC)
        assert info is not None and local_start > 0
        follower = Log.open(tmp_path / "follower" / "tiered-0", leader.config,
                            clock=t.clock)
        follower.leader_epoch_cache.assign(0, 0)
        nxt = asyncio.run(build_remote_log_aux_state(
            t.rlm, TopicIdPartition(info.topic_id, TOPIC, 0), follower, target_epoch=0,
            leader_local_log_start_offset=local_start, leader_log_start_offset=0))
        assert nxt == local_start
        assert follower.log_end_offset == local_start and follower.log_start_offset == 0
        assert follower.local_log_start_offset == local_start
        assert follower.leader_epoch_cache.entries == [EpochEntry(0, 0)]
        entry = follower.producer_state.last_entry(PRODUCER_ID)
        assert entry is not None and entry.last_seq == local_start - 1
        follower.close()
    finally:
        t.close()



def test_a_follower_whose_metadata_read_fails_warns_naming_it_and_retries(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's RLMFollowerTask reschedules after any error, logged with its partition: a
    follower whose read of ``__remote_log_metadata`` fails says so naming the partition and
    the error (a warning; an unexpected error, as a reply it cannot decode, an error with
    its traceback), backs off and tracks the copies at a later attempt; the pass goes on
    for the other partitions (before, an unexpected error ended the pass for all of them,
    the partition unnamed)."""
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", partitions=2)
    try:
        t.produce(20, partition=0)
        t.produce(20, partition=1)
        t.run()  # both led here: both copied
        follower_log = t.log(1)
        copied = follower_log.highest_offset_in_remote_storage
        assert copied > 0
        follower_log.highest_offset_in_remote_storage = -1  # as a follower that tracked none
        leader_partitions = t.rlm.partitions

        def partitions() -> list[TieredPartition]:
            out: list[TieredPartition] = []
            for p in leader_partitions():
                if p.topic_partition.partition == 1:
                    p = FollowerView(p.topic_partition, p.log, p.topic_id, p.leader_epoch)
                out.append(p)
            return out

        t.rlm.partitions = partitions
        real_refresh = t.rlm.rlmm.refresh
        failures: list[Exception] = [ValueError("undecodable metadata reply"),
                                     RemoteLogMetadataError("broker 1 not reachable")]

        async def refresh(tip: TopicIdPartition) -> RemoteLogMetadataCache:
            if tip.partition == 1 and failures:
                raise failures.pop()
            return await real_refresh(tip)

        t.rlm.rlmm.refresh = refresh  # type: ignore[method-assign]
        task = t.rlm.tasks[TopicPartition(TOPIC, 1)]
        for level, error in ((logging.WARNING, "broker 1 not reachable"),
                             (logging.ERROR, "ValueError('undecodable metadata reply')")):
            t.clock.advance(max(0, task.backoff.next_attempt_ms - t.clock.milliseconds()))
            caplog.clear()
            leader_copied = t.log(0).highest_offset_in_remote_storage
            t.produce(10, partition=0, start=leader_copied + 1)
            with caplog.at_level(logging.WARNING, logger="tidelog.server.remote_log_manager"):
                t.run()
            (record,) = caplog.records
            assert record.levelno == level
            line = record.getMessage()
            assert ":tiered-1 (follower) failed" in line and error in line, line
            assert follower_log.highest_offset_in_remote_storage == -1
            assert t.log(0).highest_offset_in_remote_storage > leader_copied  # pass went on
            task = t.rlm.tasks[TopicPartition(TOPIC, 1)]
            assert not task.is_leader and task.backoff.next_attempt_ms > t.clock.milliseconds()
            t.run()  # backing off: not tried again yet
            assert follower_log.highest_offset_in_remote_storage == -1
        assert task.backoff.failures == 2
        t.clock.advance(task.backoff.next_attempt_ms - t.clock.milliseconds())
        t.run()
        assert follower_log.highest_offset_in_remote_storage == copied
        assert task.backoff.failures == 0
        assert follower_log.delete_old_segments() > 0  # local retention goes on
    finally:
        t.close()
