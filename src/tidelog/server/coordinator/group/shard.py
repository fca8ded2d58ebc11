"""The group coordinator on the coordinator runtime (Kafka's GroupCoordinatorShard;
the classic GroupCoordinator.onElection / onResignation over GroupMetadataManager's
scheduleLoadGroupAndOffsets and removeGroupsForPartition).

A broker that becomes leader of ``__consumer_offsets`` partition N loads N's groups (their
ids answer COORDINATOR_LOAD_IN_PROGRESS until it is done); one that loses N forgets N's
groups at once (NOT_COORDINATOR from then on), completing waiting joins and syncs with
NOT_COORDINATOR so their members go find the new coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.pending_offsets import LoadedPartition
from tidelog.server.coordinator.runtime import CoordinatorPartitions

log = logging.getLogger(__name__)


class GroupCoordinatorShard:
    def __init__(self, coord: GroupCoordinator) -> None:
        self.coord = coord
        self._loads: dict[int, LoadedPartition] = {}  # replays in flight

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.coord.manager.partitions

    def read_batches(self, partition: int) -> Iterable[RecordBatch]:
        return self.coord.manager.store.read_batches(partition)

    def on_loading(self, partition: int) -> None:
        forget_partition(self.coord, partition)
        self._loads[partition] = LoadedPartition()

    def replay(self, partition: int, batch: RecordBatch) -> None:
        self.coord.manager.replay_batch(self._loads[partition], partition, batch)

    def on_loaded(self, partition: int) -> None:
        self.coord.complete_load(partition, self._loads.pop(partition, LoadedPartition()))
        manager = self.coord.manager
        log.info("loaded __consumer_offsets-%d (%d groups in the cache)", partition,
                 len(manager.groups) + len(manager.consumer_groups))

    def on_unloaded(self, partition: int) -> int:
        self._loads.pop(partition, None)
        return forget_partition(self.coord, partition)


def forget_partition(coord: GroupCoordinator, partition: int) -> int:
    """Drop the groups of ``partition`` (classic, consumer and share) and their pending
    writes; returns how many groups went."""
    manager = coord.manager
    mine = manager.partition_for
    classic = [g for g in manager.groups if mine(g) == partition]
    for group_id in classic:
        _unload_classic(manager.groups.pop(group_id), coord.clock.milliseconds())
    consumer = [g for g in manager.consumer_groups if mine(g) == partition]
    for group_id in consumer:
        for member in manager.consumer_groups.pop(group_id).members.values():
            member.cancel_timers()
    share = [g for g in coord.share.groups if mine(g) == partition]
    for group_id in share:
        for sm in coord.share.groups.pop(group_id).members.values():
            if sm.session_task is not None:
                sm.session_task.cancel()
    manager.pending_txn.forget_partition(partition, mine)
    manager.pending_commits.forget_partition(partition)
    return len(classic) + len(consumer) + len(share)


def _unload_classic(group: GroupMetadata, now: int) -> None:
    """Kafka's onGroupUnloaded: the group is Dead here, its waiting members told
    NOT_COORDINATOR, its timers stopped."""
    group.end_members(ErrorCode.NOT_COORDINATOR)
    if not group.is_state(GroupState.DEAD):
        group.transition_to(GroupState.DEAD, now)
