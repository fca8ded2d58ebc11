"""KIP-932 share groups in the coordinator, on a manual clock: membership and assignment,
share sessions and their epochs, and a share-partition's record states (acquire, accept,
release, reject, lock expiry, delivery count limit, a leaving member's records)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from consumer_group_harness import Cluster

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import CommitEntry, GroupCoordinator
from tidelog.server.coordinator.group.group_configs import GroupConfigStore
from tidelog.server.coordinator.group.share.coordinator import ShareHeartbeat
from tidelog.server.coordinator.group.share.partition import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RecordState,
    SharePartition,
)
from tidelog.server.coordinator.group.share.persister import LocalPersister
from tidelog.server.coordinator.share.state_coordinator import ShareStateCoordinator, StateResult
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

LOCK_MS = 30_000
TP = TopicPartition("q", 0)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sp(clock: ManualClock) -> SharePartition:
    return SharePartition(10, scheduler=ManualScheduler(clock), lock_ms=LOCK_MS,
                          delivery_limit=5, max_locks=100)


def test_accepted_records_move_the_start_offset(sp: SharePartition) -> None:
    assert sp.acquire("a", range(10, 15), 3) == [(10, 12, 1)]
    assert sp.acquire("b", range(10, 15), 10) == [(13, 14, 1)]  # disjoint
    assert sp.acknowledge("a", 10, 12, [ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 13 and sp.next_available() == 15
    assert sp.acknowledge("b", 13, 14, [ACCEPT, REJECT]) == ErrorCode.NONE
    assert sp.start_offset == 15 and not sp.records


def test_only_the_holder_acknowledges_and_nothing_changes_on_a_bad_batch(
        sp: SharePartition) -> None:
    sp.acquire("a", range(10, 12), 10)
    assert sp.acknowledge("b", 10, 10, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 10, 12, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # 12 not held
    assert sp.records[10].state is RecordState.ACQUIRED
    assert sp.acknowledge("a", 10, 11, [ACCEPT, 9]) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 10, 11, [ACCEPT, GAP]) == ErrorCode.NONE
    assert sp.start_offset == 12


def test_a_lock_that_runs_out_offers_the_record_again(sp: SharePartition,
                                                      clock: ManualClock) -> None:
    sp.acquire("a", [10], 1)
    clock.advance(LOCK_MS - 1)
    assert sp.acquire("b", [10], 1) == []
    clock.advance(1)
    assert sp.acquire("b", [10], 1) == [(10, 10, 2)]  # the second delivery
    assert sp.acknowledge("a", 10, 10, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE


def test_a_record_released_up_to_the_delivery_limit_is_archived(sp: SharePartition) -> None:
    for delivery in range(1, 6):
        assert sp.acquire("a", [10, 11], 1) == [(10, 10, delivery)]
        assert sp.acknowledge("a", 10, 10, [RELEASE]) == ErrorCode.NONE
    assert sp.start_offset == 11  # archived after the fifth delivery
    assert sp.acquire("a", [10, 11], 1) == [(11, 11, 1)]


def test_a_leaving_member_gives_back_what_it_holds(sp: SharePartition) -> None:
    sp.acquire("a", range(10, 13), 10)
    assert sp.release_member("a") == 3  # its session timed out: they were delivered
    assert sp.acquire("b", range(10, 13), 10) == [(10, 12, 2)]
    assert sp.release_member("b", delivered=False) == 3  # b closed its session: not counted
    assert sp.acquire("c", range(10, 13), 10) == [(10, 12, 2)]


def test_control_batches_are_archived(sp: SharePartition) -> None:
    sp.archive([10])
    assert sp.start_offset == 11


def _coord(clock: ManualClock) -> GroupCoordinator:
    coord = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1), clock=clock,
                             scheduler=ManualScheduler(clock), store=InMemoryOffsetsStore())
    coord.startup()
    cluster = Cluster()
    cluster.create("q", 2)
    coord.share.topics = cluster
    return coord


def test_members_share_every_partition_and_time_out(clock: ManualClock) -> None:
    coord = _coord(clock)
    a = coord.share.heartbeat(ShareHeartbeat("s", "a", 0, ("q",)))
    b = coord.share.heartbeat(ShareHeartbeat("s", "b", 0, ("q",)))
    assert a.error == b.error == ErrorCode.NONE
    assert a.assignment is not None and b.assignment is not None
    assert sum(len(p) for p in a.assignment.values()) == 2  # alone at first
    assert sum(len(p) for p in b.assignment.values()) == 1  # then the SimpleAssignor spreads
    a = coord.share.heartbeat(ShareHeartbeat("s", "a", a.member_epoch))
    assert a.assignment is not None and sum(len(p) for p in a.assignment.values()) == 1
    assert a.assignment != b.assignment
    assert coord.share.heartbeat(ShareHeartbeat("s", "b", b.member_epoch + 5)).error == \
        ErrorCode.FENCED_MEMBER_EPOCH
    sp = coord.share.share_partition("s", TP, 0)
    sp.acquire("b", range(3), 10)
    epoch = a.member_epoch
    for _ in range(3):
        clock.advance(coord.config.group_share_session_timeout_ms // 3)
        r = coord.share.heartbeat(ShareHeartbeat("s", "a", epoch))
        assert r.error == ErrorCode.NONE
        epoch = r.member_epoch
    assert set(coord.share.groups["s"].members) == {"a"}
    assert sp.acquire("a", range(3), 10) == [(0, 2, 2)]  # b's records came back


def test_share_sessions_and_their_epochs(clock: ManualClock) -> None:
    coord = _coord(clock)
    share = coord.share
    assert share.session("s", "a", 0)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    share.heartbeat(ShareHeartbeat("s", "a", 0, ("q",)))
    assert share.session("s", "a", 1)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert share.session("s", "a", 0)[0] == ErrorCode.NONE
    assert share.session("s", "a", 1)[0] == ErrorCode.NONE
    assert share.session("s", "a", 1)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert share.session("s", "a", 2)[0] == ErrorCode.NONE
    share.share_partition("s", TP, 0).acquire("a", range(2), 10)
    assert share.session("s", "a", -1)[0] == ErrorCode.NONE
    share.close_session("s", "a")
    assert share.session("s", "a", 3)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert share.share_partition("s", TP, 0).acquire("b", range(2), 10) == [(0, 1, 2)]


def test_one_id_names_one_kind_of_group(clock: ManualClock) -> None:
    coord = _coord(clock)
    coord.commit_offsets("classic", {TP: CommitEntry(1)})
    r = coord.share.heartbeat(ShareHeartbeat("classic", "a", 0, ("q",)))
    assert r.error == ErrorCode.GROUP_ID_NOT_FOUND


def _with_state(coord: GroupCoordinator, store: InMemoryOffsetsStore,
                clock: ManualClock) -> ShareStateCoordinator:
    state = ShareStateCoordinator(store, 3, clock)
    for p in range(3):
        state.load_now(p)
    coord.share.state_coordinator = state
    coord.share.durable.persister = LocalPersister(state)
    return state


def test_share_state_is_written_as_kafka_snapshots_and_read_back(clock: ManualClock) -> None:
    store = InMemoryOffsetsStore()
    coord = _coord(clock)
    _with_state(coord, store, clock)
    tid = coord.share.topics()["q"].topic_id

    async def first() -> None:
        assert await coord.share.load_partition("s", TP, tid, 100, 0) == ErrorCode.NONE
        assert await coord.share.durable.flush(("s", TP)) == ErrorCode.NONE  # starts at 100
        sp = coord.share.partitions[("s", TP)]
        sp.acquire("a", range(100, 110), 10)
        batches = [(100, 101, [ACCEPT]), (102, 102, [REJECT])]
        assert coord.share.acknowledge("s", "a", TP, batches) == ErrorCode.NONE
        assert await coord.share.durable.flush(("s", TP)) == ErrorCode.NONE
        sp.acknowledge("a", 103, 103, [RELEASE])  # not yet written: the next change is
        coord.share.close_session("s", "a")  # a leaves holding 104..109: written available
        assert await coord.share.durable.flush(("s", TP)) == ErrorCode.NONE

    asyncio.run(first())
    written = [b for part in store.partitions.values() for b in part]
    assert len(written) == 3  # the initial state, then one ShareSnapshot per change
    again = _coord(clock)
    again.share.topics = coord.share.topics
    _with_state(again, store, clock)  # a new share coordinator loads the topic

    async def second() -> None:
        assert await again.share.load_partition("s", TP, tid, 999, 1) == ErrorCode.NONE

    asyncio.run(second())
    restored = again.share.partitions[("s", TP)]
    assert restored.start_offset == 103  # 100, 101 accepted and 102 rejected stay so
    assert restored.acquire("b", range(100, 112), 20) == [(103, 109, 2), (110, 111, 1)]


def test_a_marker_archived_first_does_not_hide_the_records_before_it(
        sp: SharePartition) -> None:
    sp.archive([12])  # a transaction marker read in the same fetch as 10 and 11
    assert sp.acquire("a", [10, 11], 10) == [(10, 11, 1)]
    assert sp.acknowledge("a", 10, 11, [ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 13


class GatedPersister(LocalPersister):
    """Reads wait for ``gate``; ``error`` stands for an unavailable share coordinator."""

    def __init__(self, coord: ShareStateCoordinator) -> None:
        super().__init__(coord)
        self.gate = asyncio.Event()
        self.error = ErrorCode.NONE
        self.reads: list[tuple[str, uuid.UUID, int]] = []

    async def read(self, key: tuple[str, uuid.UUID, int], leader_epoch: int) -> StateResult:
        self.reads.append(key)
        await self.gate.wait()
        if self.error != ErrorCode.NONE:
            return StateResult(self.error)
        return await super().read(key, leader_epoch)


def test_a_load_runs_on_its_own_and_a_recreated_topic_loads_anew(clock: ManualClock) -> None:
    coord = _coord(clock)
    state = _with_state(coord, InMemoryOffsetsStore(), clock)
    gated = coord.share.durable.persister = GatedPersister(state)
    share = coord.share
    old, new = uuid.uuid4(), uuid.uuid4()

    async def run() -> None:
        first = share.begin_load("s", TP, old, 7, 0)
        assert first is not None
        assert share.begin_load("s", TP, old, 7, 0) is first  # one load at a time
        await asyncio.sleep(0)
        assert not first.done() and ("s", TP) not in share.partitions
        again = share.begin_load("s", TP, new, 9, 0)  # the topic was created again
        assert again is not None and again is not first
        await asyncio.sleep(0)
        assert first.cancelled()  # the old topic's state is not taken
        gated.gate.set()
        assert await again == ErrorCode.NONE
        assert share.begin_load("s", TP, new, 9, 0) is None  # in memory now
        assert share.topic_ids[("s", TP)] == new
        assert share.partitions[("s", TP)].start_offset == 9
        assert gated.reads == [("s", old, 0), ("s", new, 0)]

    asyncio.run(run())


def test_a_failed_load_is_answered_once_then_read_again(clock: ManualClock) -> None:
    coord = _coord(clock)
    state = _with_state(coord, InMemoryOffsetsStore(), clock)
    gated = coord.share.durable.persister = GatedPersister(state)
    gated.error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    gated.gate.set()
    share, tid = coord.share, uuid.uuid4()

    async def run() -> None:
        load = share.begin_load("s", TP, tid, 0, 0)
        assert load is not None
        # Kafka's SharePartition.fetchPersisterError: an unavailable coordinator
        assert await load == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert share.begin_load("s", TP, tid, 0, 0) is load  # its answer, once
        share.load_answered("s", TP, load)
        gated.error = ErrorCode.NONE
        retry = share.begin_load("s", TP, tid, 0, 0)
        assert retry is not None and retry is not load
        assert await retry == ErrorCode.NONE
        assert len(gated.reads) == 2

    asyncio.run(run())


class LateGroupConfigs(GroupConfigStore):
    """The group's share.auto.offset.reset, set through another broker, arrives here only
    when read again (its notification still on the way)."""

    async def reread(self, group_id: str) -> None:
        self.overrides = {group_id: {"share.auto.offset.reset": "earliest"}}


def test_a_new_share_partition_starts_where_the_group_config_stored_now_says(
        clock: ManualClock) -> None:
    coord = _coord(clock)
    _with_state(coord, InMemoryOffsetsStore(), clock)
    coord.use_group_configs(LateGroupConfigs(coord.config))
    tid = coord.share.topics()["q"].topic_id

    async def run() -> None:
        assert await coord.share.load_partition("s", TP, tid, 50, 0, 3) == ErrorCode.NONE

    asyncio.run(run())
    assert coord.share.partitions[("s", TP)].start_offset == 3  # earliest, not 50
