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

from tidelog.records import RecordBatch
from tidelog.server.coordinator.runtime import ReplayShard

from .coordinator import TransactionCoordinator
from .records import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

Latest = dict[bytes, bytes | None]  # the last value of each key (a tombstone too)


class TransactionCoordinatorShard(ReplayShard[Latest]):
    def __init__(self, coord: TransactionCoordinator) -> None:
        super().__init__(coord.state.partitions, coord.state.store.read_batches)
        self.coord = coord

    def new_load(self) -> Latest:
        return {}

    def replay_into(self, loaded: Latest, partition: int, batch: RecordBatch) -> None:
        self.coord.state.replay_batch(loaded, batch)

    def install(self, partition: int, loaded: Latest) -> None:
        prepared = self.coord.state.complete_load(partition, loaded)
        log.info("loaded %s-%d (%d prepared transactions to complete)",
                 TRANSACTION_STATE_TOPIC, partition, len(prepared))
        self.coord.resume(prepared)

    def forget(self, partition: int) -> int:
        return self.coord.state.forget_partition(partition)
