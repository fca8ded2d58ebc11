"""The share coordinator on the coordinator runtime (Kafka's ShareCoordinatorShard under
ShareCoordinatorService): a broker that becomes leader of ``__share_group_state`` partition
N loads N's share-partition states (COORDINATOR_LOAD_IN_PROGRESS for their keys meanwhile);
one that loses N forgets them at once (NOT_COORDINATOR)."""

from __future__ import annotations

from collections.abc import Iterable

from tidelog.records import RecordBatch
from tidelog.server.coordinator.group.share.records import ShareState
from tidelog.server.coordinator.group.share.state_coordinator import ShareStateCoordinator, StateKey
from tidelog.server.coordinator.runtime import CoordinatorPartitions


class ShareCoordinatorShard:
    def __init__(self, coord: ShareStateCoordinator) -> None:
        self.coord = coord
        self._loads: dict[int, dict[StateKey, ShareState]] = {}  # replays in flight

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.coord.partitions

    def read_batches(self, partition: int) -> Iterable[RecordBatch]:
        return self.coord.store.read_batches(partition)

    def on_loading(self, partition: int) -> None:
        self.coord.forget(partition)
        self._loads[partition] = {}

    def replay(self, partition: int, batch: RecordBatch) -> None:
        self.coord.replay_batch(self._loads[partition], batch)

    def on_loaded(self, partition: int) -> None:
        self.coord.install(partition, self._loads.pop(partition, {}))

    def on_unloaded(self, partition: int) -> int:
        self._loads.pop(partition, None)
        return self.coord.forget(partition)
