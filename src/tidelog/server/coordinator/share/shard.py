"""The share coordinator on the coordinator runtime (Kafka's ShareCoordinatorShard under
ShareCoordinatorService): a broker that becomes leader of ``__share_group_state`` partition
N loads N's share-partition states (COORDINATOR_LOAD_IN_PROGRESS for their keys meanwhile);
one that loses N forgets them at once (NOT_COORDINATOR)."""

from __future__ import annotations

from tidelog.records import RecordBatch
from tidelog.server.coordinator.runtime import ReplayShard
from tidelog.server.coordinator.share.records import ShareState
from tidelog.server.coordinator.share.state_coordinator import (
    ShareStateCoordinator,
)
from tidelog.server.coordinator.share.uncommitted import StateKey

Loaded = dict[StateKey, ShareState]


class ShareCoordinatorShard(ReplayShard[Loaded]):
    def __init__(self, coord: ShareStateCoordinator) -> None:
        super().__init__(coord.partitions, coord.store.read_batches)
        self.coord = coord

    def new_load(self) -> Loaded:
        return {}

    def replay_into(self, loaded: Loaded, partition: int, batch: RecordBatch) -> None:
        self.coord.replay_batch(loaded, batch)

    def install(self, partition: int, loaded: Loaded) -> None:
        self.coord.install(partition, loaded)

    def forget(self, partition: int) -> int:
        return self.coord.forget(partition)
