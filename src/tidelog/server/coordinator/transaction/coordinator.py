"""Kafka's TransactionCoordinator on one node, sans I/O: time from a Clock, producer ids
from a callable, markers through a ``MarkerWriter``, state through the
TransactionStateManager. Every method runs to completion on the broker's event loop.

EndTxn writes PrepareCommit/PrepareAbort, a COMMIT/ABORT control batch into every partition
of the transaction, then CompleteCommit/CompleteAbort. The ``MarkerWriter`` writes a marker
in-process and returns None, or returns an awaitable that completes once the marker is on
the partition's leader (and its ISR) elsewhere (WriteTxnMarkers); CompleteCommit/Abort is
written once every marker is. A crash between the two leaves the prepared
state in ``__transaction_state``; loading resumes it (``resume``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from .config import TxnConfig
from .metadata import (
    COMPLETED,
    NO_PRODUCER_EPOCH,
    PREPARED,
    TransactionMetadata,
    TransactionState,
)
from .state_manager import TransactionStateManager

log = logging.getLogger(__name__)
COORDINATOR_EPOCH = 0  # the leader epoch of a single node's __transaction_state partitions


class MarkerWriter(Protocol):
    def __call__(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int, commit: bool) -> Awaitable[None] | None:
        """Append one COMMIT/ABORT control batch to ``tp`` (raises on a storage failure),
        or start sending it to ``tp``'s leader and return what completes when it is written."""
        ...


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, *, clock: Clock, state: TransactionStateManager,
                 allocate_producer_id: Callable[[], int], write_marker: MarkerWriter) -> None:
        self.config = config
        self.clock = clock
        self.state = state
        self.allocate_producer_id = allocate_producer_id
        self.write_marker = write_marker
        self.active = True
        self._marker_waits: set[asyncio.Future[None]] = set()

    # -- InitProducerId ------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        try:
            return self._init(transactional_id, timeout_ms, expected)
        except ApiError as exc:
            return InitResult(exc.code)

    def _init(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None) -> InitResult:
        meta = self.state.get(tid)
        if meta is None:
            meta = TransactionMetadata(tid, self.allocate_producer_id(), txn_timeout_ms=timeout_ms,
                                       txn_last_update_timestamp=self.clock.milliseconds())
        if meta.pending:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_expected(meta, expected):
            return InitResult(ErrorCode.PRODUCER_FENCED)
        if meta.state in PREPARED:
            self._complete(meta)  # markers a storage error interrupted: try again now
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == TransactionState.ONGOING:
            # Kafka fences the current epoch, aborts, and has the client retry: the retry
            # bumps the epoch once more.
            self._fence_and_abort(meta)
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        new = self._next_epoch(meta, timeout_ms, expected)
        if isinstance(new, ErrorCode):
            return InitResult(new)
        self.state.write(new)
        log.info("initialized transactional id %s with producer id %d epoch %d",
                 tid, new.producer_id, new.producer_epoch)
        return InitResult(ErrorCode.NONE, new.producer_id, new.producer_epoch)

    def _next_epoch(self, meta: TransactionMetadata, timeout_ms: int,
                    expected: tuple[int, int] | None) -> TransactionMetadata | ErrorCode:
        """Kafka's prepareIncrementProducerEpoch / prepareProducerIdRotation."""
        new = meta.copy()
        if meta.is_epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            new.previous_producer_id = meta.producer_id
            new.producer_id = self.allocate_producer_id()
            new.producer_epoch = 0
            new.last_producer_epoch = meta.producer_epoch if expected else NO_PRODUCER_EPOCH
        elif expected is None:
            new.producer_epoch, new.last_producer_epoch = meta.producer_epoch + 1, -1
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
            new.producer_epoch, new.last_producer_epoch = meta.producer_epoch + 1, meta.producer_epoch
        elif expected[1] == meta.last_producer_epoch:
            pass  # a retry of a bump whose answer was lost: same epoch again
        else:
            return ErrorCode.PRODUCER_FENCED
        new.txn_timeout_ms = timeout_ms
        new.state = TransactionState.EMPTY
        new.partitions = set()
        new.txn_start_timestamp = -1
        new.txn_last_update_timestamp = self.clock.milliseconds()
        return new

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> ErrorCode:
        if not tid:
            return ErrorCode.INVALID_REQUEST
        try:
            meta = self.state.get(tid)
        except ApiError as exc:
            return exc.code
        parts = set(partitions)
        err = _check_producer(meta, producer_id, producer_epoch)
        if err != ErrorCode.NONE:
            return err
        assert meta is not None
        if meta.pending or meta.state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state == TransactionState.ONGOING and parts <= meta.partitions:
            return ErrorCode.NONE
        now = self.clock.milliseconds()
        new = meta.copy()
        if meta.state != TransactionState.ONGOING:
            new.txn_start_timestamp = now
        new.state = TransactionState.ONGOING
        new.partitions |= parts
        new.txn_last_update_timestamp = now
        try:
            self.state.write(new)
        except ApiError as exc:
            return exc.code
        return ErrorCode.NONE

    def verify_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 verify_only (KIP-890): NONE for partitions in the
        transaction, TRANSACTION_ABORTABLE for the others."""
        parts = list(partitions)
        if not tid:
            return dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
        try:
            meta = self.state.get(tid)
        except ApiError as exc:
            return dict.fromkeys(parts, exc.code)
        err = _check_producer(meta, producer_id, producer_epoch)
        if err == ErrorCode.NONE and meta is not None and meta.state in PREPARED:
            err = ErrorCode.CONCURRENT_TRANSACTIONS
        if err != ErrorCode.NONE:
            return dict.fromkeys(parts, err)
        assert meta is not None
        return {tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in parts}

    def in_transaction(self, producer_id: int, producer_epoch: int, tp: TopicPartition) -> bool:
        """The produce path's verification: is ``tp`` part of an ongoing transaction of this
        producer id and epoch? (Kafka asks the coordinator with AddPartitionsToTxn v4.)"""
        meta = self.state.by_producer(producer_id)
        return (meta is not None and meta.producer_epoch == producer_epoch
                and meta.state == TransactionState.ONGOING and tp in meta.partitions)

    # -- EndTxn --------------------------------------------------------------------------------
    def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                *, from_client: bool = True) -> ErrorCode:
        if not tid:
            return ErrorCode.INVALID_REQUEST
        try:
            meta = self.state.get(tid)
            if meta is None or meta.producer_id != producer_id:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            ok = (producer_epoch == meta.producer_epoch if from_client
                  else producer_epoch >= meta.producer_epoch)
            if not ok:
                return ErrorCode.PRODUCER_FENCED
            if meta.pending:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            return self._end(meta, commit)
        except ApiError as exc:
            return exc.code

    def _end(self, meta: TransactionMetadata, commit: bool) -> ErrorCode:
        s = meta.state
        if s == TransactionState.ONGOING:
            new = meta.copy()
            new.state = (TransactionState.PREPARE_COMMIT if commit
                         else TransactionState.PREPARE_ABORT)
            new.txn_last_update_timestamp = self.clock.milliseconds()
            self.state.write(new)  # the decision is durable before any marker
            self._complete(new)
            return ErrorCode.NONE
        done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        prepared = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if s == done:
            return ErrorCode.NONE  # a retry of an EndTxn that completed
        if s == prepared:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Kafka's prepareFenceProducerEpoch + endTransaction(ABORT, isFromClient=false)."""
        fenced = meta.copy()
        fenced.producer_epoch = meta.producer_epoch + 1
        fenced.last_producer_epoch = NO_PRODUCER_EPOCH
        fenced.state = TransactionState.PREPARE_ABORT
        fenced.txn_last_update_timestamp = self.clock.milliseconds()
        self.state.write(fenced)
        log.info("fenced producer %d of %s at epoch %d and aborting its transaction",
                 meta.producer_id, meta.transactional_id, fenced.producer_epoch)
        self._complete(fenced)

    def _complete(self, meta: TransactionMetadata) -> None:
        """Write the markers of a prepared transaction, then its Complete* state. A storage
        failure leaves it prepared; ``abort_timed_out`` retries it. In a cluster the markers
        wait until the ISR has the Prepare* state (Kafka writes them in that append's
        callback): a new coordinator never finds a transaction Ongoing whose markers exist."""
        commit = meta.state == TransactionState.PREPARE_COMMIT
        meta.pending = True
        durable = self.state.durable(meta.transactional_id)
        if durable is not None:
            wait = asyncio.ensure_future(self._markers_once_durable(meta, commit, durable))
            self._marker_waits.add(wait)
            wait.add_done_callback(self._marker_waits.discard)
            return
        self._write_markers(meta, commit)

    async def _markers_once_durable(self, meta: TransactionMetadata, commit: bool,
                                    durable: Awaitable[ErrorCode]) -> None:
        error = await durable
        if error != ErrorCode.NONE:
            log.error("the %s state of %s is not replicated (retried later): %s",
                      meta.state.kafka_name, meta.transactional_id, error.name)  # fmt: skip
            meta.pending = False
            return
        if self.state.transactions.get(meta.transactional_id) is not meta:
            meta.pending = False
            return  # unloaded meanwhile: the new coordinator completes it
        self._write_markers(meta, commit)

    def _write_markers(self, meta: TransactionMetadata, commit: bool) -> None:
        try:
            waits = [w for tp in sorted(meta.partitions)
                     if (w := self.write_marker(tp, meta.producer_id, meta.producer_epoch,
                                                COORDINATOR_EPOCH, commit)) is not None]
        except Exception as exc:
            log.error("writing the markers of %s failed (retried later): %s",
                      meta.transactional_id, exc)
            meta.pending = False
            return
        if not waits:
            self._write_complete(meta, commit)
            return
        wait = asyncio.ensure_future(self._complete_after(meta, commit, waits))
        self._marker_waits.add(wait)
        wait.add_done_callback(self._marker_waits.discard)

    async def _complete_after(self, meta: TransactionMetadata, commit: bool,
                              waits: list[Awaitable[None]]) -> None:
        results = await asyncio.gather(*waits, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            log.error("markers of %s not written (retried later): %s", meta.transactional_id,
                      failed[0])
            meta.pending = False
            return
        if self.state.transactions.get(meta.transactional_id) is not meta:
            return  # unloaded meanwhile: the new coordinator completes it
        self._write_complete(meta, commit)

    def _write_complete(self, meta: TransactionMetadata, commit: bool) -> None:
        try:
            done = meta.copy()
            done.state = (TransactionState.COMPLETE_COMMIT if commit
                          else TransactionState.COMPLETE_ABORT)
            done.partitions = set()
            done.txn_last_update_timestamp = self.clock.milliseconds()
            self.state.write(done)
        except Exception as exc:
            log.error("completing transaction %s failed (retried later): %s",
                      meta.transactional_id, exc)
        finally:
            meta.pending = False

    def resume(self, prepared: Iterable[TransactionMetadata]) -> None:
        """At load: finish what a crash interrupted between Prepare* and Complete*."""
        for meta in prepared:
            log.info("resuming %s of %s", meta.state.kafka_name, meta.transactional_id)
            self._complete(meta)

    # -- timers --------------------------------------------------------------------------------
    def abort_timed_out(self) -> list[str]:
        """Abort every Ongoing transaction older than its timeout (Kafka:
        ``txnStartTimestamp + txnTimeoutMs < now``), bumping the epoch so the producer is
        fenced; retry prepared transactions whose markers failed. Returns the aborted ids."""
        now = self.clock.milliseconds()
        aborted = []
        for meta in list(self.state.transactions.values()):
            if meta.pending or self._partition_busy(meta):
                continue
            if meta.state in PREPARED:
                self._complete(meta)
            elif (meta.state == TransactionState.ONGOING
                  and meta.txn_start_timestamp + meta.txn_timeout_ms < now):
                try:
                    self._fence_and_abort(meta)
                    aborted.append(meta.transactional_id)
                except ApiError as exc:
                    log.warning("aborting timed-out %s failed: %s", meta.transactional_id, exc)
        return aborted

    def _partition_busy(self, meta: TransactionMetadata) -> bool:
        p = self.state.partition_for(meta.transactional_id)
        return p in self.state.partitions.loading or p not in self.state.partitions.owned

    def remove_expired(self) -> list[str]:
        """Tombstone ids idle for ``transactional.id.expiration.ms`` with no transaction."""
        now = self.clock.milliseconds()
        limit = self.config.transactional_id_expiration_ms
        removed = []
        for meta in list(self.state.transactions.values()):
            if (meta.state in COMPLETED and not meta.pending
                    and meta.txn_last_update_timestamp <= now - limit
                    and not self._partition_busy(meta)):
                try:
                    self.state.remove(meta.transactional_id)
                    removed.append(meta.transactional_id)
                except ApiError:
                    break
        return removed

    # -- Describe / List -----------------------------------------------------------------------
    def describe(self, tid: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if not tid:
            return ErrorCode.INVALID_REQUEST, None
        try:
            meta = self.state.get(tid)
        except ApiError as exc:
            return exc.code, None
        if meta is None or meta.state == TransactionState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list(self, producer_ids: set[int], states: set[str],
             duration_ms: int = -1) -> list[TxnListing]:
        """Kafka's listTransactionStates filters: ids, state names, running for at least
        ``duration_ms`` (KIP-994; -1 = any)."""
        now = self.clock.milliseconds()
        out = []
        for meta in self.state.transactions.values():
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if states and meta.state.kafka_name not in states:
                continue
            if duration_ms >= 0 and (meta.state != TransactionState.ONGOING
                                     or now - meta.txn_start_timestamp < duration_ms):
                continue
            out.append(TxnListing(meta.transactional_id, meta.producer_id,
                                  meta.state.kafka_name))
        return out


def _valid_expected(meta: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's isValidProducerId for a KIP-360 InitProducerId with the current id/epoch."""
    pid, epoch = expected
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
            or (pid == meta.previous_producer_id and epoch >= 0x7FFF - 1))


def _check_producer(meta: TransactionMetadata | None, producer_id: int,
                    producer_epoch: int) -> ErrorCode:
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE
