"""A follower behind its leader's local start builds its state from remote storage (Kafka's
buildRemoteLogAuxState): empty after the remote segment below the leader's local start, the
leader's log start kept below it, the leader-epoch cache and the producer state (an
idempotent producer's last sequence) restored from that segment's remote files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidelog.records import RecordBatchBuilder
from tidelog.server.remote_log_follower import build_remote_log_aux_state, parse_epoch_checkpoint
from tidelog.storage.leader_epoch import EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS, TOPIC, open_tiered

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

