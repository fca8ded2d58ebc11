"""A follower as the leader sees it (Kafka's ReplicaTest cases) and the leader-epoch check of
requests, pure."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster.partition_state import (
    PartitionState,
    high_watermark_candidate,
    leader_epoch_error,
)
from tidelog.server.cluster.replica import UNKNOWN_OFFSET, Replica

LAG = 30_000


def test_fetch_at_the_leaders_end_is_caught_up_now() -> None:
    r = Replica(2)
    r.update_fetch_state(10, 0, fetch_time_ms=1_000, leader_end_offset=10, broker_epoch=7)
    assert (r.log_end_offset, r.last_caught_up_time_ms, r.broker_epoch) == (10, 1_000, 7)
    assert r.is_caught_up(10, 1_000 + LAG + 1, LAG)  # at the leader's end, however late


def test_reaching_what_the_leader_had_last_time_counts_from_the_last_fetch() -> None:
    r = Replica(2)
    r.update_fetch_state(5, 0, fetch_time_ms=1_000, leader_end_offset=10, broker_epoch=1)
    assert r.last_caught_up_time_ms == 0  # behind, and never caught up before
    r.update_fetch_state(10, 0, fetch_time_ms=2_000, leader_end_offset=15, broker_epoch=1)
    # it reached the 10 the leader had at the previous fetch: caught up as of then
    assert r.last_caught_up_time_ms == 1_000
    r.update_fetch_state(12, 0, fetch_time_ms=3_000, leader_end_offset=20, broker_epoch=1)
    assert r.last_caught_up_time_ms == 1_000  # short of the 15 it was shown
    assert not r.is_caught_up(20, 1_000 + LAG + 1, LAG)
    assert r.is_caught_up(20, 1_000 + LAG, LAG)


def test_reset_on_a_new_leader_keeps_isr_members_caught_up() -> None:
    r = Replica(2)
    r.update_fetch_state(10, 3, fetch_time_ms=1_000, leader_end_offset=10, broker_epoch=1)
    r.reset(5_000, 12, is_new_leader=True, in_sync=True)
    assert (r.log_end_offset, r.log_start_offset, r.broker_epoch) == (
        UNKNOWN_OFFSET, UNKNOWN_OFFSET, None)
    assert r.last_caught_up_time_ms == 5_000
    out = Replica(3)
    out.reset(5_000, 12, is_new_leader=False, in_sync=False)
    assert (out.last_caught_up_time_ms, out.last_fetch_time_ms) == (0, 0)
    assert out.last_fetch_leader_log_end_offset == 12


def test_leader_epoch_check() -> None:
    assert leader_epoch_error(-1, 5) is None
    assert leader_epoch_error(5, 5) is None
    assert leader_epoch_error(4, 5) == ErrorCode.FENCED_LEADER_EPOCH
    assert leader_epoch_error(6, 5) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_high_watermark_counts_only_the_counted_replicas() -> None:
    assert high_watermark_candidate(10, {2: 4, 3: 8}, frozenset({2, 3})) == 4
    assert high_watermark_candidate(10, {2: 4, 3: 8}, frozenset({3})) == 8
    assert high_watermark_candidate(10, {2: 40}, frozenset({2})) == 10


def test_pending_isr_changes_and_the_maximal_isr() -> None:
    committed = PartitionState.committed(frozenset({1, 2}))
    expanding = committed.pending_expand(3)
    assert (expanding.isr, expanding.maximal_isr, expanding.in_flight) == (
        {1, 2}, {1, 2, 3}, True)
    shrinking = committed.pending_shrink()
    assert (shrinking.isr, shrinking.maximal_isr, shrinking.in_flight) == ({1, 2}, {1, 2}, True)
