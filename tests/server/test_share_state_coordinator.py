"""The share coordinator's shard sans I/O (Kafka's ShareCoordinatorShard): state batches
combined as PersisterStateBatchCombiner does, leader and state epochs fencing, initialize and
delete, ShareSnapshot records written and a partition's snapshots and Kafka's ShareUpdate
records read back, ownership by ``__share_group_state`` partition."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatchBuilder, iter_batches
from tidelog.server.coordinator.runtime import CoordinatorRuntime, CoordinatorState
from tidelog.server.coordinator.share.records import (
    SHARE_STATE_TOPIC,
    SNAPSHOT_KEY,
    UPDATE_KEY,
    decode_key,
    decode_value,
    encode_key,
)
from tidelog.server.coordinator.share.shard import ShareCoordinatorShard
from tidelog.server.coordinator.share.state_coordinator import (
    ShareStateCoordinator,
    combine_batches,
)
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")
KEY = ("g", TOPIC, 0)
N = 3


def _coord(store: InMemoryOffsetsStore, owned: bool = True) -> ShareStateCoordinator:
    c = ShareStateCoordinator(store, N, ManualClock())
    if owned:
        for p in range(N):
            c.load_now(p)
    return c


def _unowned(
    store: InMemoryOffsetsStore,
) -> tuple[ShareStateCoordinator, CoordinatorRuntime, TopicPartition]:
    """A coordinator owning nothing, on a runtime; KEY's ``__share_group_state`` partition."""
    c = _coord(store, owned=False)
    runtime = CoordinatorRuntime()
    runtime.register(SHARE_STATE_TOPIC, ShareCoordinatorShard(c))
    return c, runtime, TopicPartition(SHARE_STATE_TOPIC, c.partition_for(KEY))


def test_newer_batches_win_over_the_ranges_they_cover() -> None:
    current = [(0, 9, 0, 1), (10, 19, 2, 1)]
    merged = combine_batches(current, [(5, 12, 4, 3)], 0)
    assert merged == ((0, 4, 0, 1), (5, 12, 4, 3), (13, 19, 2, 1))
    # below the start offset nothing stays; equal neighbours join
    assert combine_batches(merged, [(13, 19, 4, 3)], 6) == ((6, 19, 4, 3),)
    assert combine_batches([(0, 3, 2, 1)], [], 10) == ()


def test_write_then_read_returns_the_merged_state_and_fences_older_leaders() -> None:
    store = InMemoryOffsetsStore()
    c = _coord(store)
    assert c.read(KEY, 0).state is not None
    assert c.read(KEY, 0).state.start_offset == -1  # nothing stored yet
    assert c.write(KEY, 0, 1, 100, ((100, 104, 2, 1),)) == ErrorCode.NONE
    assert c.write(KEY, 0, 1, -1, ((103, 106, 0, 2),)) == ErrorCode.NONE
    r = c.read(KEY, 2)  # a new leader reads: epoch 1 is fenced from now on
    assert r.error == ErrorCode.NONE and r.state is not None
    assert (r.state.start_offset, r.state.batches) == (100, ((100, 102, 2, 1),
                                                             (103, 106, 0, 2)))
    assert c.write(KEY, 0, 1, 107, ()) == ErrorCode.FENCED_LEADER_EPOCH
    assert c.read(KEY, 1).error == ErrorCode.FENCED_LEADER_EPOCH
    assert c.write(KEY, 0, 2, 107, ()) == ErrorCode.NONE
    assert c.summary(KEY).state.start_offset == 107  # type: ignore[union-attr]


def test_initialize_bumps_the_state_epoch_and_fences_older_ones() -> None:
    c = _coord(InMemoryOffsetsStore())
    assert c.write(KEY, 0, 0, 10, ((10, 12, 2, 1),)) == ErrorCode.NONE
    assert c.initialize(KEY, 1, 50) == ErrorCode.NONE
    s = c.summary(KEY).state
    assert s is not None and (s.state_epoch, s.start_offset, s.batches) == (1, 50, ())
    assert c.write(KEY, 0, 0, 60, ()) == ErrorCode.FENCED_STATE_EPOCH
    assert c.initialize(KEY, 0, 5) == ErrorCode.FENCED_STATE_EPOCH


def _update_value(leader_epoch: int, start: int, batches: list[tuple[int, int, int, int]]
                  ) -> bytes:
    """Kafka's ShareUpdateValue v0 (flexible), as a Kafka broker writes it."""
    out = struct.pack(">hHiq", 0, 0, leader_epoch, start) + bytes([len(batches) + 1])
    for first, last, state, count in batches:
        out += struct.pack(">qqbh", first, last, state, count) + b"\x00"
    return out + b"\x00"


def test_a_partition_is_loaded_from_snapshots_updates_and_tombstones() -> None:
    store = InMemoryOffsetsStore()
    c = _coord(store)
    other = ("h", TOPIC, 1)
    assert c.write(KEY, 0, 0, 0, ((0, 4, 0, 1),)) == ErrorCode.NONE
    assert c.write(other, 0, 0, 7, ()) == ErrorCode.NONE
    assert c.delete(other) == ErrorCode.NONE
    raw = [rec for part in store.partitions.values() for data in part
           for b in iter_batches(data)
           for rec in b.iter_records()]
    assert [decode_key(r.key).version for r in raw] == [SNAPSHOT_KEY] * 3
    assert raw[-1].value is None  # the delete is a tombstone
    assert decode_value(raw[0].value, SNAPSHOT_KEY).batches == ((0, 4, 0, 1),)
    builder = RecordBatchBuilder()
    builder.append(0, encode_key(*KEY, version=UPDATE_KEY),
                   _update_value(3, 2, [(2, 3, 2, 1)]))
    store.append(c.partition_for(KEY), builder.build())
    again = _coord(store)
    s = again.summary(KEY).state
    assert s is not None
    assert (s.leader_epoch, s.start_offset) == (3, 2)
    assert again.read(KEY, 3).state.batches == ((2, 3, 2, 1), (4, 4, 0, 1))  # type: ignore
    assert again.summary(other).state.start_offset == -1  # type: ignore[union-attr]


@pytest.mark.parametrize("loading", [True, False])
def test_keys_of_partitions_not_owned_are_refused(loading: bool) -> None:
    store = InMemoryOffsetsStore()
    c, runtime, tp = _unowned(store)

    async def load() -> None:
        task = runtime.schedule_load(tp)
        assert task is not None
        assert c.read(KEY, 0).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await task

    if loading:
        asyncio.run(load())
        assert c.write(KEY, 0, 0, 1, ()) == ErrorCode.NONE
        assert runtime.schedule_unload(tp) == 1  # resigned: its states go
        assert c.partitions.state(tp.partition) == CoordinatorState.CLOSED
    assert c.read(KEY, 0).error == ErrorCode.NOT_COORDINATOR
    assert c.write(KEY, 0, 0, 1, ()) == ErrorCode.NOT_COORDINATOR


def test_a_superseded_load_installs_nothing() -> None:
    store = InMemoryOffsetsStore()
    writer = _coord(store)
    for i in range(200):  # enough batches for the load to yield to the loop
        assert writer.write(KEY, 0, 0, i, ()) == ErrorCode.NONE
    c, runtime, tp = _unowned(store)

    async def load_then_resign() -> None:
        task = runtime.schedule_load(tp)
        assert task is not None
        await asyncio.sleep(0)  # the load has started reading
        runtime.schedule_unload(tp)
        await task

    asyncio.run(load_then_resign())
    assert c.key_error(KEY) == ErrorCode.NOT_COORDINATOR
    assert KEY not in c.states


async def _load(runtime: CoordinatorRuntime, tp: TopicPartition) -> None:
    task = runtime.schedule_load(tp)
    assert task is not None
    await task


def test_a_failed_install_leaves_the_partition_failed() -> None:
    c, runtime, tp = _unowned(InMemoryOffsetsStore())

    def broken(partition: int, loaded: object) -> None:
        raise RuntimeError("injected install failure")

    c.install = broken  # type: ignore[method-assign,assignment]

    asyncio.run(_load(runtime, tp))
    assert c.partitions.state(tp.partition) == CoordinatorState.FAILED
    assert c.key_error(KEY) == ErrorCode.NOT_COORDINATOR


def test_unknown_partitions_and_negative_ones_are_refused() -> None:
    c = ShareStateCoordinator(InMemoryOffsetsStore(), N, ManualClock(),
                              partition_exists=lambda t, p: p < 2)
    c.partitions.owned.update(range(N))
    assert c.read(("g", TOPIC, 5), 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.write(("g", TOPIC, -1), 0, 0, 0, ()) == ErrorCode.INVALID_REQUEST
