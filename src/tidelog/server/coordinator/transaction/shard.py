"""The transaction coordinator on the coordinator runtime (Kafka's
TransactionCoordinator.onElection / onResignation over TransactionStateManager's
loadTransactionsForTxnTopicPartition and removeTransactionsForTxnTopicPartition).

On becoming leader of ``__transaction_state`` partition N the broker loads N's transactional
ids (COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes the transactions it finds
prepared (PrepareCommit / PrepareAbort: the markers are written again, as Kafka resends
them). On losing N it forgets N's ids at once (NOT_COORDINATOR).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tidelog.records import RecordBatch
from tidelog.server.coordinator.runtime import CoordinatorPartitions

from .coordinator import TransactionCoordinator
from .records import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)


class TransactionCoordinatorShard:
    def __init__(self, coord: TransactionCoordinator) -> None:
        self.coord = coord
        self._loads: dict[int, dict[bytes, bytes | None]] = {}  # replays in flight

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.coord.state.partitions

    def read_batches(self, partition: int) -> Iterable[RecordBatch]:
        return self.coord.state.store.read_batches(partition)

    def on_loading(self, partition: int) -> None:
        self.coord.state.forget_partition(partition)
        self._loads[partition] = {}

    def replay(self, partition: int, batch: RecordBatch) -> None:
        self.coord.state.replay_batch(self._loads[partition], batch)

    def on_loaded(self, partition: int) -> None:
        prepared = self.coord.state.complete_load(partition, self._loads.pop(partition, {}))
        log.info("loaded %s-%d (%d prepared transactions to complete)",
                 TRANSACTION_STATE_TOPIC, partition, len(prepared))
        self.coord.resume(prepared)

    def on_unloaded(self, partition: int) -> int:
        self._loads.pop(partition, None)
        return self.coord.state.forget_partition(partition)
