"""read_committed for a fetch loop: drop the batches of aborted transactions, as Kafka's
consumer does (Fetcher's CompletedFetch: ``consumeAbortedTransactionsUpTo`` and
``isBatchAborted``), using the aborted-transaction list a Fetch at isolation level 1 returns
for each partition."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from tidelog.records import RecordBatch
from tidelog.records.batch import ControlRecordType


class AbortedFilter:
    """Feed it each response's (producer_id, first_offset) list, then ask per batch, in offset
    order, whether the batch belongs to an aborted transaction."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, int]] = []  # (first_offset, producer_id), a heap
        self._seen: set[tuple[int, int]] = set()
        self._aborting: set[int] = set()  # producers inside an aborted transaction

    def add(self, aborted: Iterable[tuple[int, int]]) -> None:
        for producer_id, first_offset in aborted:
            if (first_offset, producer_id) not in self._seen:  # a refetch repeats the list
                self._seen.add((first_offset, producer_id))
                heapq.heappush(self._pending, (first_offset, producer_id))

    def is_aborted(self, batch: RecordBatch) -> bool:
        if batch.producer_id < 0:
            return False
        while self._pending and self._pending[0][0] <= batch.last_offset:
            self._aborting.add(heapq.heappop(self._pending)[1])
        if batch.is_control:
            if batch.control_type() == ControlRecordType.ABORT:
                self._aborting.discard(batch.producer_id)
            return False
        return batch.is_transactional and batch.producer_id in self._aborting
