"""The group coordinator follows its internal partitions' leadership on the coordinator runtime
(onElection / onResignation), in-process over in-memory partition stores: loading answers COORDINATOR_LOAD_IN_PROGRESS,
a resigned partition NOT_COORDINATOR, its waiting members are told, and a load superseded
by a resignation installs nothing."""

from __future__ import annotations

import asyncio

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.coordinator import CommitEntry
from tidelog.server.coordinator.group.member import JoinResult
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.group.shard import GroupCoordinatorShard
from tidelog.server.coordinator.runtime import CoordinatorRuntime, CoordinatorState
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.topic_partition import TopicPartition

from .harness import Harness

TP = TopicPartition("t", 0)


def _runtime(h: Harness) -> CoordinatorRuntime:
    runtime = CoordinatorRuntime()
    runtime.register(OFFSETS_TOPIC, GroupCoordinatorShard(h.coord))
    return runtime


def _tp(p: int) -> TopicPartition:
    return TopicPartition(OFFSETS_TOPIC, p)


def _committed(h: Harness, group: str) -> dict[TopicPartition, int]:
    err, fetched = h.coord.fetch_offsets(group, None)
    assert err == ErrorCode.NONE
    return {tp: f.offset for tp, f in fetched.items()}


def test_a_new_leader_loads_the_groups_a_resigned_one_forgets_them() -> None:
    store = InMemoryOffsetsStore()
    first = Harness(store)
    assert first.coord.commit_offsets("g", {TP: CommitEntry(42)}) == {TP: ErrorCode.NONE}
    p = first.coord.manager.partition_for("g")
    # another broker (same replicated partition) becomes its leader
    second = Harness(store)
    runtime = _runtime(second)
    runtime.schedule_unload(_tp(p))
    assert second.coord.group_error("g") == ErrorCode.NOT_COORDINATOR
    assert second.coord.manager.partitions.state(p) == CoordinatorState.CLOSED

    async def elect() -> None:
        task = runtime.schedule_load(_tp(p))
        assert task is not None
        assert second.coord.group_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert second.coord.manager.partitions.state(p) == CoordinatorState.LOADING
        await task

    asyncio.run(elect())
    assert _committed(second, "g") == {TP: 42}
    assert second.coord.manager.partitions.state(p) == CoordinatorState.ACTIVE
    # the old leader resigns: it answers NOT_COORDINATOR and holds nothing of the group
    assert _runtime(first).schedule_unload(_tp(p)) == 1
    assert first.coord.group_error("g") == ErrorCode.NOT_COORDINATOR
    assert "g" not in first.coord.groups
    assert first.coord.commit_offsets("g", {TP: CommitEntry(43)}) == {
        TP: ErrorCode.NOT_COORDINATOR}


def test_resignation_answers_waiting_members_not_coordinator() -> None:
    h = Harness()
    ids = h.stable_group(2, "g")
    box = h.join("g", ids[0])  # a rebalance starts; the join waits for the other member
    assert not box.done
    assert _runtime(h).schedule_unload(_tp(h.coord.manager.partition_for("g"))) == 1
    result = box.one
    assert isinstance(result, JoinResult) and result.error == ErrorCode.NOT_COORDINATOR
    # no timer of the unloaded group fires into the cache later
    h.clock.advance(10 * 60_000)
    assert "g" not in h.coord.groups


def test_a_load_superseded_by_a_resignation_installs_nothing() -> None:
    store = InMemoryOffsetsStore()
    writer = Harness(store)
    for i in range(200):  # enough batches for the load to yield to the loop
        writer.coord.commit_offsets("g", {TP: CommitEntry(i)})
    p = writer.coord.manager.partition_for("g")
    h = Harness(store)
    runtime = _runtime(h)
    runtime.schedule_unload(_tp(p))

    async def elect_then_resign() -> None:
        task = runtime.schedule_load(_tp(p))
        assert task is not None
        await asyncio.sleep(0)  # the load has started reading
        runtime.schedule_unload(_tp(p))
        await task

    asyncio.run(elect_then_resign())
    assert h.coord.group_error("g") == ErrorCode.NOT_COORDINATOR
    assert "g" not in h.coord.groups
