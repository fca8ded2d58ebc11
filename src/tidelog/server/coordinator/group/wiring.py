"""Plugs the group coordinator into the asyncio broker.

``start_group_coordinator(broker)`` (called by ``Broker.start``) builds the coordinator
(config from the broker's properties, storage over the broker's logs, timers on the event
loop), registers it with the coordinator runtime for ``__consumer_offsets`` and, on one
broker, loads that topic in the background, answering COORDINATOR_LOAD_IN_PROGRESS
meanwhile; the broker keeps both in typed fields and
hands them to ``stop_group_coordinator`` when it stops. Handlers call
``coordinator_for(broker)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.log_store import LogOffsetsStore
from tidelog.server.coordinator.group.member import JoinResult, SyncResult
from tidelog.server.coordinator.group.pending_offsets import LoadedPartition
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.group.shard import GroupCoordinatorShard
from tidelog.server.coordinator.runtime import CoordinatorRuntime
from tidelog.server.coordinator.timer import CoordinatorTimer
from tidelog.server.errors import ApiError
from tidelog.util.clock import Clock

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.server.replica_manager import ReplicaManager


class HasGroupCoordinator(Protocol):
    """What ``coordinator_for`` reads (the broker)."""

    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...


def start_group_coordinator(
    broker_config: BrokerConfig, clock: Clock, replica_manager: ReplicaManager,
    runtime: CoordinatorRuntime,
) -> tuple[GroupCoordinator, asyncio.Task[None] | None]:
    """The coordinator, registered with ``runtime`` for ``__consumer_offsets``, and the task
    loading that topic into it on one broker (None in a cluster, where partitions load as
    leadership arrives, and when the topic does not exist yet: nothing to load)."""
    config = GroupConfig.from_props(broker_config.originals)
    loop = asyncio.get_running_loop()
    timer = CoordinatorTimer(loop, clock, "group coordinator")
    coord = GroupCoordinator(
        config,
        clock=clock,
        scheduler=timer,
        store=LogOffsetsStore(replica_manager, config),
        node_id=broker_config.node_id,
    )
    coord.startup(load=False)
    runtime.register(OFFSETS_TOPIC, GroupCoordinatorShard(coord), timer)
    if not replica_manager.one_broker:  # in a cluster: loaded as leadership arrives
        coord.manager.confirm_writes = True  # commits reach the cache once replicated
        return coord, None
    partitions = range(config.offsets_topic_num_partitions)
    if replica_manager.topic(OFFSETS_TOPIC) is None:
        for p in partitions:
            coord.complete_load(p, LoadedPartition())
        return coord, None
    return coord, runtime.load_all(OFFSETS_TOPIC, partitions)


def stop_group_coordinator(coord: GroupCoordinator, load: asyncio.Task[None] | None,
                           runtime: CoordinatorRuntime) -> None:
    if load is not None:
        load.cancel()
    runtime.unregister(OFFSETS_TOPIC)  # its timer stops
    coord.shutdown()


def coordinator_for(broker: HasGroupCoordinator) -> GroupCoordinator:
    """The broker's group coordinator; COORDINATOR_NOT_AVAILABLE before start and after stop."""
    coord = broker.group_coordinator
    if coord is None:
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker is not running")
    return coord


async def replicated(coord: GroupCoordinator, group_id: str) -> ErrorCode:
    """In a cluster: NONE once the ISR has the group's writes so far (acks=all), else the
    coordinator's error; at once on one broker."""
    manager = coord.manager
    store = manager.store
    appender = store.replicated if isinstance(store, LogOffsetsStore) else None
    partition = manager.partition_for(group_id)
    if appender is None:
        manager.complete_commits(partition, None, True)
        return ErrorCode.NONE
    up_to = appender.pending.get(partition)  # what the wait below covers
    error = await appender.replicated(partition)
    manager.complete_commits(partition, up_to, error == ErrorCode.NONE)
    return error


def join_future() -> tuple[asyncio.Future[JoinResult], Callable[[JoinResult], None]]:
    fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

    def done(r: JoinResult) -> None:
        if not fut.done():
            fut.set_result(r)

    return fut, done


def sync_future() -> tuple[asyncio.Future[SyncResult], Callable[[SyncResult], None]]:
    fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def done(r: SyncResult) -> None:
        if not fut.done():
            fut.set_result(r)

    return fut, done
