"""The group coordinator follows ``__consumer_offsets`` leadership (Kafka's
GroupCoordinator.onElection / onResignation over GroupMetadataManager.scheduleLoadGroupAndOffsets
and removeGroupsForPartition).

A broker that becomes leader of partition N loads N's groups in the background (their ids
answer COORDINATOR_LOAD_IN_PROGRESS until it is done); one that loses N forgets N's groups at
once (NOT_COORDINATOR from then on), completing waiting joins and syncs with NOT_COORDINATOR
so their members go find the new coordinator. A load superseded by a resignation (or a newer
election) is dropped when it ends: each election bumps the partition's load epoch.
"""

from __future__ import annotations

import asyncio
import logging

from tidelog.protocol.errors import ErrorCode
from tidelog.server.group.coordinator import GroupCoordinator
from tidelog.server.group.group import GroupMetadata, GroupState
from tidelog.server.group.member import JoinResult, SyncResult
from tidelog.server.group.pending_offsets import LoadedPartition

log = logging.getLogger(__name__)

LOAD_BATCHES_PER_TURN = 64


def on_election(coord: GroupCoordinator, partition: int) -> asyncio.Task[None]:
    """Start loading ``partition``: COORDINATOR_LOAD_IN_PROGRESS for its groups meanwhile."""
    manager = coord.manager
    epoch = manager.load_epochs.get(partition, 0) + 1
    manager.load_epochs[partition] = epoch
    _forget(coord, partition)
    manager.loading.add(partition)
    return asyncio.get_running_loop().create_task(_load(coord, partition, epoch))


def on_resignation(coord: GroupCoordinator, partition: int) -> int:
    """Forget ``partition``'s groups; returns how many were unloaded."""
    manager = coord.manager
    manager.load_epochs[partition] = manager.load_epochs.get(partition, 0) + 1
    manager.loading.discard(partition)
    manager.owned.discard(partition)
    return _forget(coord, partition)


async def _load(coord: GroupCoordinator, partition: int, epoch: int) -> None:
    manager = coord.manager
    data = LoadedPartition()
    try:
        for i, batch in enumerate(manager.store.read_batches(partition)):
            manager.replay_batch(data, partition, batch)
            if i % LOAD_BATCHES_PER_TURN == LOAD_BATCHES_PER_TURN - 1:
                await asyncio.sleep(0)
                if manager.load_epochs.get(partition) != epoch:
                    return
    except Exception:
        log.exception("failed to read __consumer_offsets-%d; loading what was read", partition)
    if manager.load_epochs.get(partition) != epoch or not coord.active:
        return  # resigned (or elected again) meanwhile
    coord.complete_load(partition, data)
    log.info("loaded __consumer_offsets-%d (%d groups in the cache)", partition,
             len(manager.groups) + len(manager.consumer_groups))


def _forget(coord: GroupCoordinator, partition: int) -> int:
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
    for task in (group.join_task, group.sync_task, *group.pending_members.values()):
        if task is not None:
            task.cancel()
    for member in group.members.values():
        member.cancel_heartbeat()
        member.complete_join(JoinResult(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
        member.complete_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
    if not group.is_state(GroupState.DEAD):
        group.transition_to(GroupState.DEAD, now)
