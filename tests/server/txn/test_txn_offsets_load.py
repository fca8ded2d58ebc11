"""Transactional offsets in the group coordinator: pending until the producer's marker,
replayed by a load with the same rules, and settled by a marker that lands while the
partition is loading (a prepared transaction resumed at start)."""

from __future__ import annotations

from types import SimpleNamespace

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import CommitEntry, GroupCoordinator
from tidelog.server.coordinator.group.metadata_manager import LoadedPartition
from tidelog.server.coordinator.group.txn_offsets import (
    commit_txn_offsets,
    complete_txn_offsets,
    has_pending,
)
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("in", 0)
PID = 7


def _coord(store: InMemoryOffsetsStore, load: bool = True) -> GroupCoordinator:
    clock = ManualClock()
    coord = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1), clock=clock,
                             scheduler=ManualScheduler(clock), store=store)
    coord.startup(load=load)
    return coord


def _marker(store: InMemoryOffsetsStore, commit: bool) -> None:
    b = RecordBatchBuilder(producer_id=PID, producer_epoch=0, is_transactional=True,
                           is_control=True)
    b.append_control(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 0, 0)
    store.append(0, b.build())


def _committed(coord: GroupCoordinator) -> int | None:
    group = coord.groups.get("g")
    o = group.offsets.get(TP) if group is not None else None
    return None if o is None else o.offset


def _pending_commit(coord: GroupCoordinator, offset: int) -> None:
    errs = commit_txn_offsets(coord, "g", {TP: CommitEntry(offset)}, producer_id=PID,
                              producer_epoch=0)
    assert errs == {TP: ErrorCode.NONE}


def test_pending_until_commit_marker_and_dropped_on_abort() -> None:
    store = InMemoryOffsetsStore()
    coord = _coord(store)
    broker = SimpleNamespace(group_coordinator=coord)
    _pending_commit(coord, 5)
    assert _committed(coord) is None and has_pending(coord.manager, "g", TP)
    _marker(store, True)
    complete_txn_offsets(broker, 0, PID, True)
    assert _committed(coord) == 5 and not has_pending(coord.manager, "g", TP)
    _pending_commit(coord, 9)
    _marker(store, False)
    complete_txn_offsets(broker, 0, PID, False)
    assert _committed(coord) == 5
    # a load replays the same: 5 committed, 9 aborted, then one still undecided
    _pending_commit(coord, 11)
    reloaded = _coord(store)
    assert _committed(reloaded) == 5 and has_pending(reloaded.manager, "g", TP)


def test_marker_landing_while_the_partition_loads_settles_the_offsets() -> None:
    store = InMemoryOffsetsStore()
    _pending_commit(_coord(store), 5)
    coord = _coord(store, load=False)  # loading: every partition is marked loading
    data = LoadedPartition()
    for batch in store.read_batches(0):  # the loader read up to here ...
        coord.manager.replay_batch(data, 0, batch)
    _marker(store, True)  # ... then the resumed transaction's marker lands
    complete_txn_offsets(SimpleNamespace(group_coordinator=coord), 0, PID, True)
    coord.complete_load(0, data)
    assert _committed(coord) == 5 and not has_pending(coord.manager, "g", TP)
