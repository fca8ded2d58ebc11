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

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.pending_offsets import LoadedPartition
from tidelog.server.coordinator.runtime import ReplayShard

log = logging.getLogger(__name__)


class GroupCoordinatorShard(ReplayShard[LoadedPartition]):
    def __init__(self, coord: GroupCoordinator) -> None:
        super().__init__(coord.manager.partitions, coord.manager.store.read_batches)
        self.coord = coord

    def new_load(self) -> LoadedPartition:
        return LoadedPartition()

    def replay_into(self, loaded: LoadedPartition, partition: int, batch: RecordBatch) -> None:
        self.coord.manager.replay_batch(loaded, partition, batch)

    def install(self, partition: int, loaded: LoadedPartition) -> None:
        self.coord.complete_load(partition, loaded)
        manager = self.coord.manager
        log.info("loaded __consumer_offsets-%d (%d groups in the cache)", partition,
                 len(manager.groups) + len(manager.consumer_groups))

    def forget(self, partition: int) -> int:
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
