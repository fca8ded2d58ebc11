"""Transaction bookkeeping while cleaning (Kafka's CleanedTransactionMetadata), behaviour #136.

Aborted transactions are known from the transaction indexes (``collect_aborted_transactions``).
Walking the batches in offset order, a transactional data batch of an aborted transaction can
be discarded; an ABORT marker is kept (and re-recorded in the cleaned segment's `.txnindex`)
while some batch of its transaction is still in the cleaned range; a COMMIT marker whose
transaction had no data batch in the range, or an ABORT whose data is gone, is discardable
(the cleaner removes it only once a delete horizon set by an earlier pass has passed).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from tidelog.records import ControlRecordType, RecordBatch, parse_control_key

from ..index.txn_index import AbortedTxn, TransactionIndex


class _AbortedTxnState:
    __slots__ = ("aborted_txn", "last_observed_batch_offset")

    def __init__(self, aborted_txn: AbortedTxn) -> None:
        self.aborted_txn = aborted_txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Which transactional batches and markers a cleaning pass may discard."""

    def __init__(self, cleaned_index: TransactionIndex | None = None) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # min-heap by first offset
        self._seq = 0
        # Where retained aborted transactions are re-recorded (the cleaned segment's txn index).
        self.cleaned_index = cleaned_index

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._aborted, (t.first_offset, self._seq, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _f, _s, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """A marker was reached; True if it can be discarded."""
        self._consume_aborted_up_to(batch.last_offset)
        first = next(iter(batch.iter_records()), None)
        if first is None:
            return True  # an empty control batch was cleaned already
        ctype = parse_control_key(first.key)
        pid = batch.producer_id
        if ctype is ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.aborted_txn)
                return False
            return True
        if ctype is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """A data batch was reached; True if it belongs to an aborted transaction."""
        self._consume_aborted_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        state = self._ongoing_aborted.get(batch.producer_id)
        if state is not None:
            state.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False

    def on_plain_batches_read(self, last_offset: int | None) -> None:
        """Non-transactional data batches up to ``last_offset`` were read (a run of them):
        what ``on_batch_read`` does for each."""
        if last_offset is not None:
            self._consume_aborted_up_to(last_offset)

    def should_discard_batch(self, batch: RecordBatch) -> bool:
        if batch.is_control:
            return self.on_control_batch_read(batch)
        return self.on_batch_read(batch)
