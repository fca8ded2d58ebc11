"""The transaction APIs on the wire, in Kafka's order, with Kafka's error codes: the
produce-side verification (a transactional batch for a partition outside the transaction is
INVALID_TXN_STATE), epochs, retries, Describe/ListTransactions, AddPartitionsToTxn v4."""

from __future__ import annotations

import datetime
import time
from typing import Any

from broker_wire import Wire, produce_body

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import RecordBatchBuilder
from tidelog.testing import EmbeddedBroker

TOPIC = "txn-wire"


def _txn_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    b.append(0, None, value)
    return b.build()


def _produce(w: Wire, pid: int, epoch: int, seq: int, partition: int = 0) -> int:
    body: Any = produce_body(9, TOPIC, {partition: _txn_batch(pid, epoch, seq, b"v")})
    resp: Any = w.call(0, 9, body=body)
    return int(resp.responses[0].partition_responses[0].error_code)


def _add(w: Wire, tid: str, pid: int, epoch: int, *parts: int, version: int = 3) -> list[int]:
    cls = request_class(24, version)
    tcls = nested(cls, "v3_and_below_topics")
    resp: Any = w.call(24, version, v3_and_below_transactional_id=tid,
                       v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                       v3_and_below_topics=(make(tcls, name=TOPIC, partitions=parts),))
    return [int(r.partition_error_code) for t in resp.results_by_topic_v3_and_below
            for r in t.results_by_partition]


def _init(w: Wire, tid: str, version: int = 4, pid: int = -1, epoch: int = -1) -> Any:
    """Retried while ``__transaction_state`` loads in the background, as clients do."""
    deadline = time.monotonic() + 30
    while True:
        resp: Any = w.call(22, version, transactional_id=tid,
                           transaction_timeout=datetime.timedelta(seconds=60),
                           producer_id=pid, producer_epoch=epoch)
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or (
                time.monotonic() > deadline):
            return resp


def _end(w: Wire, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    deadline = time.monotonic() + 30
    while True:
        resp: Any = w.call(26, version, transactional_id=tid, producer_id=pid,
                           producer_epoch=epoch, committed=commit)
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or (
                time.monotonic() > deadline):
            return int(resp.error_code)


def test_transaction_flow_and_error_codes(broker: EmbeddedBroker) -> None:
    broker.broker.replica_manager.create_topic(TOPIC, 2, {})
    with Wire(broker) as w:
        found: Any = w.call(10, 3, key="wire-tx", key_type=1)
        assert found.error_code == 0 and found.node_id == broker.broker.node_id
        init = _init(w, "wire-tx")
        assert init.error_code == 0
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        # the produce path's verification: not added yet
        assert _produce(w, pid, epoch, 0) == ErrorCode.INVALID_TXN_STATE
        assert _add(w, "wire-tx", pid, epoch, 0) == [0]
        assert _produce(w, pid, epoch, 0) == ErrorCode.NONE
        assert _produce(w, pid, epoch, 0, partition=1) == ErrorCode.INVALID_TXN_STATE
        assert _add(w, "wire-tx", pid, epoch + 1, 1) == [ErrorCode.PRODUCER_FENCED]
        assert _add(w, "wire-tx", pid, epoch + 1, 1, version=1) == [
            ErrorCode.INVALID_PRODUCER_EPOCH]
        assert _add(w, "wire-tx", pid + 99, epoch, 1) == [ErrorCode.INVALID_PRODUCER_ID_MAPPING]
        desc: Any = w.call(65, 0, transactional_ids=("wire-tx", "nope"))
        state, missing = desc.transaction_states
        assert (state.error_code, state.transaction_state, int(state.producer_id)) == (
            0, "Ongoing", pid)
        assert [(t.topic, tuple(t.partitions)) for t in state.topics] == [(TOPIC, (0,))]
        assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        deadline = time.monotonic() + 30
        while True:  # the whole of __transaction_state must be loaded to list
            listed: Any = w.call(66, 1, state_filters=("Ongoing", "Bogus"),
                                 producer_id_filters=(), duration_filter=-1)
            if listed.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            assert time.monotonic() < deadline
        assert listed.error_code == 0
        assert "wire-tx" in [t.transactional_id for t in listed.transaction_states]
        assert tuple(listed.unknown_state_filters) == ("Bogus",)
        assert _end(w, "wire-tx", pid, epoch, True) == 0
        assert _end(w, "wire-tx", pid, epoch, True) == 0  # a retry
        assert _end(w, "wire-tx", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE
        # a new producer for the id: the old epoch is fenced on every path
        again = _init(w, "wire-tx")
        assert (again.error_code, again.producer_epoch) == (0, epoch + 1)
        assert _end(w, "wire-tx", pid, epoch, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert _end(w, "wire-tx", pid, epoch, True) == ErrorCode.PRODUCER_FENCED
        assert _produce(w, pid, epoch, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
        stale = _init(w, "wire-tx", pid=pid + 1000, epoch=0)
        assert stale.error_code == ErrorCode.PRODUCER_FENCED
        bad = w.call(22, 4, transactional_id="wire-tx",
                     transaction_timeout=datetime.timedelta(hours=1), producer_id=-1,
                     producer_epoch=-1)
        assert bad.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT  # type: ignore[attr-defined]


def test_add_partitions_v4_verify_only(broker: EmbeddedBroker) -> None:
    broker.broker.replica_manager.create_topic("txn-v4", 2, {})
    with Wire(broker) as w:
        init = _init(w, "v4-tx")
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        cls = request_class(24, 4)
        xcls = nested(cls, "transactions")
        tcls = nested(xcls, "topics")

        def call(verify: bool) -> list[tuple[int, int]]:
            txn = make(xcls, transactional_id="v4-tx", producer_id=pid, producer_epoch=epoch,
                       verify_only=verify, topics=(make(tcls, name="txn-v4", partitions=(0, 1)),))
            resp: Any = w.call(24, 4, transactions=(txn,))
            assert resp.error_code == 0
            return [(int(p.partition_index), int(p.partition_error_code))
                    for r in resp.results_by_transaction for t in r.topic_results
                    for p in t.results_by_partition]

        assert call(True) == [(0, ErrorCode.TRANSACTION_ABORTABLE),
                              (1, ErrorCode.TRANSACTION_ABORTABLE)]
        assert call(False) == [(0, 0), (1, 0)]
        assert call(True) == [(0, 0), (1, 0)]
        assert _end(w, "v4-tx", pid, epoch, False) == 0


def _txn_commit_offsets(w: Wire, tid: str, pid: int, epoch: int, group: str, offset: int,
                        generation: int = -1, member: str = "") -> int:
    cls = request_class(28, 3)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    resp: Any = w.call(28, 3, transactional_id=tid, group_id=group, producer_id=pid,
                       producer_epoch=epoch, generation_id=generation, member_id=member,
                       group_instance_id=None, topics=(make(tcls, name=TOPIC, partitions=(
                           make(pcls, partition_index=0, committed_offset=offset,
                                committed_leader_epoch=-1, committed_metadata=""),)),))
    return int(resp.topics[0].partitions[0].error_code)


def _fetch_offset(w: Wire, group: str, stable: bool) -> tuple[int, int]:
    cls = request_class(9, 7)
    tcls = nested(cls, "topics")
    resp: Any = w.call(9, 7, group_id=group, require_stable=stable,
                       topics=(make(tcls, name=TOPIC, partition_indexes=(0,)),))
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def _add_offsets(w: Wire, tid: str, pid: int, epoch: int, group: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        resp: Any = w.call(25, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                           group_id=group)
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or (
                time.monotonic() > deadline):
            return int(resp.error_code)


def test_txn_offsets_are_pending_until_the_commit_marker_also_across_a_restart(
        tmp_path: Any) -> None:
    with EmbeddedBroker({"transaction.state.log.num.partitions": 2,
                         "offsets.topic.num.partitions": 2}, log_dir=tmp_path) as b:
        b.broker.replica_manager.create_topic(TOPIC, 2, {})
        with Wire(b) as w:
            init = _init(w, "off-tx")
            pid, epoch = int(init.producer_id), int(init.producer_epoch)
            assert _add_offsets(w, "off-tx", pid, epoch, "g") == 0
            assert _txn_commit_offsets(w, "off-tx", pid, epoch, "g", 5, generation=3) == (
                ErrorCode.ILLEGAL_GENERATION)
            assert _txn_commit_offsets(w, "off-tx", pid, epoch, "g", 5, member="nobody") == (
                ErrorCode.UNKNOWN_MEMBER_ID)
            assert _txn_commit_offsets(w, "off-tx", pid, epoch, "g", 5) == 0
            assert _fetch_offset(w, "g", stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
            assert _fetch_offset(w, "g", stable=False) == (0, -1)
        b.restart()  # the pending offsets are replayed as pending
        with Wire(b) as w:
            deadline = time.monotonic() + 30
            while _fetch_offset(w, "g", stable=True)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline
            assert _fetch_offset(w, "g", stable=True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
            assert _end(w, "off-tx", pid, epoch, True) == 0
            assert _fetch_offset(w, "g", stable=True) == (0, 5)
            # an aborted transaction's offsets never show, before or after a restart
            assert _add_offsets(w, "off-tx", pid, epoch, "g") == 0
            assert _txn_commit_offsets(w, "off-tx", pid, epoch, "g", 9) == 0
            assert _end(w, "off-tx", pid, epoch, False) == 0
            assert _fetch_offset(w, "g", stable=True) == (0, 5)
        b.restart()
        with Wire(b) as w:
            deadline = time.monotonic() + 30
            while _fetch_offset(w, "g", stable=True)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline
            assert _fetch_offset(w, "g", stable=True) == (0, 5)


def test_broker_settings_reach_the_coordinator() -> None:
    from tidelog.server.coordinator.transaction.wiring import txn_coordinator_for

    props = {"transactional.id.expiration.ms": 1234, "transaction.max.timeout.ms": 5000,
             "transaction.state.log.num.partitions": 3}
    with EmbeddedBroker(props) as b:

        async def config() -> Any:
            return txn_coordinator_for(b.broker).config

        c = b.run(config())
        assert (c.transactional_id_expiration_ms, c.transaction_max_timeout_ms,
                c.transaction_state_log_num_partitions) == (1234, 5000, 3)
