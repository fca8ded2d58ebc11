"""Offset commits staged until their write is replicated (a cluster's coordinator:
``confirm_writes``), on a ManualClock with the in-memory store: OffsetFetch sees a commit only
once the wait for its write succeeded, a failed wait drops it, completions follow log order,
and a staged commit keeps its group from being cleaned up as empty; a transactional commit whose
write failed is no longer pending; a generation's assignment not replicated is dropped and the
group rebalances."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.coordinator import CommitEntry
from tidelog.server.coordinator.group.group import GroupState
from tidelog.server.coordinator.group.records import OffsetAndMetadata, partition_for
from tidelog.util.topic_partition import TopicPartition

from .harness import Harness

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _staged() -> tuple[Harness, int]:
    h = Harness()
    h.coord.manager.confirm_writes = True
    return h, partition_for("solo", h.coord.config.offsets_topic_num_partitions)


def _fetched(h: Harness) -> int:
    return h.coord.fetch_offsets("solo", [T0])[1][T0].offset


def test_a_commit_is_fetched_only_once_replicated() -> None:
    h, p = _staged()
    assert h.coord.commit_offsets("solo", {T0: CommitEntry(10)}) == {T0: ErrorCode.NONE}
    assert _fetched(h) == -1  # appended, not yet replicated
    end = h.store.next_offsets[p]
    h.coord.manager.complete_commits(p, end, True)
    assert _fetched(h) == 10


def test_a_failed_write_drops_the_commit_and_later_ones_wait_for_theirs() -> None:
    h, p = _staged()
    m = h.coord.manager
    h.coord.commit_offsets("solo", {T0: CommitEntry(10)})
    first_end = h.store.next_offsets[p]
    h.coord.commit_offsets("solo", {T0: CommitEntry(20)})
    m.complete_commits(p, first_end, False)  # the first write timed out
    assert _fetched(h) == -1 and m.pending_commits.count(p) == 1
    m.complete_commits(p, h.store.next_offsets[p], True)
    assert _fetched(h) == 20 and m.pending_commits.count() == 0


def test_completions_apply_in_log_order() -> None:
    h, p = _staged()
    h.coord.commit_offsets("solo", {T0: CommitEntry(10)})
    h.coord.commit_offsets("solo", {T0: CommitEntry(20)})
    h.coord.manager.complete_commits(p, None, True)  # one wait covered both
    assert _fetched(h) == 20


def test_a_group_with_a_staged_commit_is_not_cleaned_up_and_resignation_drops_it() -> None:
    h, p = _staged()
    m = h.coord.manager
    h.coord.commit_offsets("solo", {T0: CommitEntry(10)})
    m.cleanup_expired_offsets()
    assert "solo" in h.coord.groups  # not an empty group yet
    m.pending_commits.forget_partition(p)
    m.complete_commits(p, None, True)
    assert _fetched(h) == -1


def test_a_failed_txn_offset_commit_leaves_nothing_for_the_marker() -> None:
    h = Harness()
    pending = h.coord.manager.pending_txn
    o = OffsetAndMetadata(7, "", 0)
    pending.add(42, "solo", {T0: o, T1: o})
    pending.fail(42, "solo", [T0])
    assert not pending.has_pending("solo", T0) and pending.has_pending("solo", T1)
    pending.fail(42, "solo", [T1])
    assert pending.by_producer == {}


def test_an_assignment_not_replicated_is_dropped_and_the_group_rebalances() -> None:
    h = Harness()
    ids = h.stable_group(2)
    group = h.coord.groups["g"]
    generation = group.generation_id
    assert group.state == GroupState.STABLE and all(m.assignment for m in group.members.values())
    h.coord.assignment_not_replicated("g", generation - 1)  # an older generation's: ignored
    assert group.state == GroupState.STABLE
    h.coord.assignment_not_replicated("g", generation)
    assert group.state == GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values()) and len(ids) == 2
