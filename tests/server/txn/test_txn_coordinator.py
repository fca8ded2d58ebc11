"""The transaction coordinator without sockets: state transitions as Kafka's
TransactionCoordinator, every one in ``__transaction_state`` (an in-memory partition store),
markers captured, time from a ManualClock."""

from __future__ import annotations

import itertools

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.records import iter_batches
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.server.coordinator.transaction.config import TxnConfig
from tidelog.server.coordinator.transaction.coordinator import TransactionCoordinator
from tidelog.server.coordinator.transaction.metadata import TransactionState
from tidelog.server.coordinator.transaction.records import decode_key, decode_value
from tidelog.server.coordinator.transaction.state_manager import TransactionStateManager
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

T0, T1 = TopicPartition("a", 0), TopicPartition("b", 1)


class Harness:
    def __init__(self, store: InMemoryOffsetsStore | None = None,
                 clock: ManualClock | None = None, **config: int) -> None:
        self.clock = clock or ManualClock()
        self.store = store or InMemoryOffsetsStore()
        self.config = TxnConfig(transaction_state_log_num_partitions=3, **config)
        self.markers: list[tuple[TopicPartition, int, int, bool]] = []
        self.fail_markers = False
        self.ids = itertools.count(1000)
        self.state = TransactionStateManager(self.config, clock=self.clock, store=self.store)
        self.coord = TransactionCoordinator(
            self.config, clock=self.clock, state=self.state,
            allocate_producer_id=lambda: next(self.ids), write_marker=self.write_marker)
        self.prepared = [m for p in range(3) for m in self.state.load_partition(p)]

    def write_marker(self, tp: TopicPartition, pid: int, epoch: int, coord_epoch: int,
                     commit: bool) -> None:
        if self.fail_markers:
            raise OSError("injected marker failure")
        self.markers.append((tp, pid, epoch, commit))

    def logged_states(self, tid: str) -> list[str]:
        out = []
        for batches in self.store.partitions.values():
            for raw in batches:
                for b in iter_batches(raw):
                    for r in b.iter_records():
                        if r.key is not None and decode_key(r.key) == tid:
                            v = None if r.value is None else decode_value(r.value)
                            out.append("DELETE" if v is None
                                       else TransactionState(v.transaction_status).kafka_name)
        return out


def begin(h: Harness, tid: str = "tx", parts: tuple[TopicPartition, ...] = (T0, T1)
          ) -> tuple[int, int]:
    res = h.coord.init_producer_id(tid, 60000)
    assert res.error == ErrorCode.NONE
    assert h.coord.add_partitions(tid, res.producer_id, res.producer_epoch, parts) == 0
    return res.producer_id, res.producer_epoch


def test_commit_writes_every_transition_and_a_marker_per_partition() -> None:
    h = Harness()
    pid, epoch = begin(h)
    assert epoch == 0
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.NONE
    assert sorted(h.markers) == [(T0, pid, 0, True), (T1, pid, 0, True)]
    assert h.logged_states("tx") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    meta = h.state.transactions["tx"]
    assert meta.state == TransactionState.COMPLETE_COMMIT and not meta.partitions
    # a retried EndTxn(commit) is fine, an abort after the commit is not
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.NONE
    assert h.coord.end_txn("tx", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE


def test_errors_for_unknown_ids_wrong_epochs_and_empty_transactions() -> None:
    h = Harness()
    assert h.coord.add_partitions("nope", 1, 0, [T0]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    res = h.coord.init_producer_id("tx", 60000)
    pid = res.producer_id
    assert h.coord.end_txn("tx", pid, 0, True) == ErrorCode.INVALID_TXN_STATE  # Empty
    assert h.coord.add_partitions("tx", pid + 1, 0, [T0]) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.add_partitions("tx", pid, 5, [T0]) == ErrorCode.PRODUCER_FENCED
    assert h.coord.init_producer_id("tx", 0).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.coord.init_producer_id("tx", 900001).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.coord.init_producer_id("", 1000).error == ErrorCode.INVALID_REQUEST


def test_second_producer_fences_the_first_and_aborts_its_transaction() -> None:
    h = Harness()
    pid, epoch = begin(h)
    # the new producer's first InitProducerId aborts the open transaction (retriable error)
    assert h.coord.init_producer_id("tx", 60000).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert sorted(h.markers) == [(T0, pid, 1, False), (T1, pid, 1, False)]
    res = h.coord.init_producer_id("tx", 60000)
    assert (res.error, res.producer_id, res.producer_epoch) == (ErrorCode.NONE, pid, 2)
    # the zombie is fenced everywhere
    assert h.coord.add_partitions("tx", pid, epoch, [T0]) == ErrorCode.PRODUCER_FENCED
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
    assert h.coord.init_producer_id("tx", 60000, (pid, epoch)).error == ErrorCode.PRODUCER_FENCED
    assert h.logged_states("tx")[-3:] == ["PrepareAbort", "CompleteAbort", "Empty"]


def test_kip360_retry_of_a_lost_bump_gets_the_same_epoch() -> None:
    h = Harness()
    first = h.coord.init_producer_id("tx", 60000)
    bumped = h.coord.init_producer_id("tx", 60000, (first.producer_id, first.producer_epoch))
    assert bumped.producer_epoch == first.producer_epoch + 1
    again = h.coord.init_producer_id("tx", 60000, (first.producer_id, first.producer_epoch))
    assert (again.error, again.producer_epoch) == (ErrorCode.NONE, bumped.producer_epoch)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    pid, _ = begin(h)
    h.coord.end_txn("tx", pid, 0, False)
    h.state.transactions["tx"].producer_epoch = 0x7FFF - 1
    res = h.coord.init_producer_id("tx", 60000)
    assert res.producer_id != pid and res.producer_epoch == 0
    assert h.state.transactions["tx"].previous_producer_id == pid


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.clock.advance(60000)
    assert h.coord.abort_timed_out() == []  # Kafka: start + timeout < now, strictly
    h.clock.advance(1)
    assert h.coord.abort_timed_out() == ["tx"]
    assert sorted(h.markers) == [(T0, pid, epoch + 1, False), (T1, pid, epoch + 1, False)]
    assert h.state.transactions["tx"].state == TransactionState.COMPLETE_ABORT
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.PRODUCER_FENCED


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness(transactional_id_expiration_ms=1000)
    pid, epoch = begin(h)
    h.clock.advance(5000)
    assert h.coord.remove_expired() == []  # an ongoing transaction never expires
    h.coord.end_txn("tx", pid, epoch, True)
    h.clock.advance(1000)
    assert h.coord.remove_expired() == ["tx"]
    assert h.logged_states("tx")[-1] == "DELETE"
    reloaded = Harness(store=h.store)
    assert "tx" not in reloaded.state.transactions


def test_reload_resumes_a_prepared_commit() -> None:
    h = Harness()
    pid, epoch = begin(h)
    h.fail_markers = True  # the "crash": PrepareCommit is logged, no marker lands
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.NONE
    assert h.state.transactions["tx"].state == TransactionState.PREPARE_COMMIT
    restarted = Harness(store=h.store, clock=h.clock)
    assert [m.transactional_id for m in restarted.prepared] == ["tx"]
    restarted.coord.resume(restarted.prepared)
    assert sorted(restarted.markers) == [(T0, pid, epoch, True), (T1, pid, epoch, True)]
    assert restarted.state.transactions["tx"].state == TransactionState.COMPLETE_COMMIT


def test_load_in_progress_and_describe_list() -> None:
    h = Harness()
    pid, epoch = begin(h, "tx", (T0,))
    err, meta = h.coord.describe("tx")
    assert err == ErrorCode.NONE and meta is not None
    assert meta.state.kafka_name == "Ongoing" and meta.partitions == {T0}
    assert h.coord.describe("missing")[0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert [t.transactional_id for t in h.coord.list(set(), {"Ongoing"})] == ["tx"]
    assert h.coord.list({pid + 1}, set()) == []
    h.clock.advance(10)
    assert len(h.coord.list(set(), set(), 10)) == 1 and h.coord.list(set(), set(), 11) == []
    h.state.partitions.loading.add(h.state.partition_for("tx"))
    assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.init_producer_id("tx", 1000).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("verify", [True])
def test_verify_partitions(verify: bool) -> None:
    h = Harness()
    pid, epoch = begin(h, "tx", (T0,))
    out = h.coord.verify_partitions("tx", pid, epoch, [T0, T1])
    assert out == {T0: ErrorCode.NONE, T1: ErrorCode.TRANSACTION_ABORTABLE}
    assert h.coord.in_transaction(pid, epoch, T0) and not h.coord.in_transaction(pid, epoch, T1)
    assert not h.coord.in_transaction(pid, epoch + 1, T0)


def test_produce_verification_answers() -> None:
    from types import SimpleNamespace

    from tidelog.records import RecordBatchBuilder
    from tidelog.server.coordinator.transaction.verification import verify_transactional_produce

    h = Harness()
    pid, epoch = begin(h, "tx", (T0,))
    broker = SimpleNamespace(txn_coordinator=h.coord)

    def batch(p: int, e: int, transactional: bool = True) -> bytes:
        b = RecordBatchBuilder(producer_id=p, producer_epoch=e, base_sequence=0,
                               is_transactional=transactional)
        b.append(0, None, b"v")
        return b.build()

    assert verify_transactional_produce(broker, T0, batch(pid, epoch)) is None
    assert verify_transactional_produce(broker, T1, batch(pid, epoch)) == (
        ErrorCode.INVALID_TXN_STATE)
    assert verify_transactional_produce(broker, T1, batch(pid, epoch, False)) is None
    h.coord.init_producer_id("tx", 60000)  # fences epoch 0 (aborting its transaction)
    assert verify_transactional_produce(broker, T0, batch(pid, epoch)) == (
        ErrorCode.INVALID_PRODUCER_EPOCH)
    h.state.partitions.loading.add(0)  # an unknown producer while a partition loads: retriable
    assert verify_transactional_produce(broker, T0, batch(pid + 7, 0)) == (
        ErrorCode.NOT_ENOUGH_REPLICAS)
