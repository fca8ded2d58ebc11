"""The transaction coordinator follows ``__transaction_state`` leadership: a new leader
loads the partition (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and completes what the old one
left prepared; the old one answers NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
import itertools

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.runtime import CoordinatorRuntime
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.server.coordinator.transaction.config import TxnConfig
from tidelog.server.coordinator.transaction.coordinator import TransactionCoordinator
from tidelog.server.coordinator.transaction.metadata import TransactionState
from tidelog.server.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from tidelog.server.coordinator.transaction.shard import TransactionCoordinatorShard
from tidelog.server.coordinator.transaction.state_manager import TransactionStateManager
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

PARTS = (TopicPartition("a", 0), TopicPartition("b", 1))


class TxnHarness:
    """A coordinator over a shared in-memory ``__transaction_state``; markers captured."""

    def __init__(self, store: InMemoryOffsetsStore | None = None) -> None:
        self.store = store or InMemoryOffsetsStore()
        self.markers: list[tuple[TopicPartition, int, int, bool]] = []
        self.fail_markers = False
        config = TxnConfig(transaction_state_log_num_partitions=3)
        self.state = TransactionStateManager(config, clock=ManualClock(), store=self.store)
        ids = itertools.count(1000)
        self.coord = TransactionCoordinator(
            config, clock=ManualClock(), state=self.state,
            allocate_producer_id=lambda: next(ids), write_marker=self.write_marker)
        for p in range(3):
            self.state.load_partition(p)
        self.runtime = CoordinatorRuntime()
        self.runtime.register(TRANSACTION_STATE_TOPIC, TransactionCoordinatorShard(self.coord))

    def write_marker(self, tp: TopicPartition, pid: int, epoch: int, coord_epoch: int,
                     commit: bool) -> None:
        if self.fail_markers:
            raise OSError("injected marker failure")
        self.markers.append((tp, pid, epoch, commit))


def begin(h: TxnHarness) -> tuple[int, int]:
    res = h.coord.init_producer_id("tx", 60000)
    assert res.error == ErrorCode.NONE
    assert h.coord.add_partitions("tx", res.producer_id, res.producer_epoch, list(PARTS)) == 0
    return res.producer_id, res.producer_epoch


def test_the_new_transaction_coordinator_completes_a_prepared_transaction() -> None:
    old = TxnHarness()
    pid, epoch = begin(old)
    old.fail_markers = True  # the coordinator dies between PrepareCommit and the markers
    assert old.coord.end_txn("tx", pid, epoch, True) == ErrorCode.NONE
    assert old.state.transactions["tx"].state == TransactionState.PREPARE_COMMIT
    p = old.state.partition_for("tx")
    state_tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
    assert old.runtime.schedule_unload(state_tp) == 1
    assert old.coord.describe("tx")[0] == ErrorCode.NOT_COORDINATOR

    new = TxnHarness(old.store)
    new.runtime.schedule_unload(state_tp)
    new.markers.clear()

    async def elect() -> None:
        task = new.runtime.schedule_load(state_tp)
        assert task is not None
        assert new.coord.describe("tx")[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await task

    asyncio.run(elect())
    assert sorted(new.markers) == sorted(
        [(tp, pid, epoch, True) for tp in PARTS])
    assert new.state.transactions["tx"].state == TransactionState.COMPLETE_COMMIT
