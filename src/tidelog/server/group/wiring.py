"""Plugs the group coordinator into the asyncio broker.

``start_group_coordinator(broker)`` (called by ``Broker.start``) builds the coordinator
(config from the broker's properties, storage over the broker's logs, timers on the event
loop) and loads ``__consumer_offsets`` in the background, one partition per loop turn,
answering COORDINATOR_LOAD_IN_PROGRESS meanwhile; the broker keeps both in typed fields and
hands them to ``stop_group_coordinator`` when it stops. Handlers call
``coordinator_for(broker)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.server.group.config import GroupConfig
from tidelog.server.group.coordinator import GroupCoordinator
from tidelog.server.group.log_store import LogOffsetsStore
from tidelog.server.group.member import JoinResult, SyncResult
from tidelog.server.group.metadata_manager import LoadedPartition
from tidelog.server.group.records import OFFSETS_TOPIC
from tidelog.util.clock import Clock
from tidelog.util.scheduler import ScheduledTask, TaskFn

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

LOAD_BATCHES_PER_TURN = 64


class LoopScheduler:
    """The ``Scheduler`` protocol on an asyncio loop: tasks run on the loop's thread, so the
    coordinator needs no locks. With a clock, a task's ``next_ms`` is when it is first due
    (a share-partition's acquisition lock tells its age by it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock | None = None) -> None:
        self.loop = loop
        self.clock = clock
        self.stopped = False

    def schedule(
        self, name: str, fn: TaskFn, delay_ms: int = 0, period_ms: int | None = None
    ) -> ScheduledTask:
        due = self.clock.milliseconds() + max(delay_ms, 0) if self.clock is not None else 0
        task = ScheduledTask(name, fn, due, period_ms)
        if self.stopped:
            task.cancel()
            return task

        def run() -> None:
            if task.cancelled or self.stopped:
                return
            try:
                fn()
            except Exception:
                log.exception("group coordinator task %s failed", name)
            task.runs += 1
            if task.periodic and not task.cancelled:
                self.loop.call_later((period_ms or 0) / 1000, run)

        self.loop.call_later(max(delay_ms, 0) / 1000, run)
        return task

    def startup(self) -> None:
        self.stopped = False

    def shutdown(self) -> None:
        self.stopped = True


class HasGroupCoordinator(Protocol):
    """What ``coordinator_for`` reads (the broker)."""

    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...


def start_group_coordinator(
    broker_config: BrokerConfig, clock: Clock, replica_manager: ReplicaManager
) -> tuple[GroupCoordinator, asyncio.Task[None] | None]:
    """The coordinator and the task loading ``__consumer_offsets`` into it (None when the
    topic does not exist yet: nothing to load, ready at once)."""
    config = GroupConfig.from_props(broker_config.originals)
    loop = asyncio.get_running_loop()
    coord = GroupCoordinator(
        config,
        clock=clock,
        scheduler=LoopScheduler(loop, clock),
        store=LogOffsetsStore(replica_manager, config),
        node_id=broker_config.node_id,
    )
    coord.startup(load=False)
    if not replica_manager.one_broker:  # in a cluster: loaded as leadership arrives
        coord.manager.confirm_writes = True  # commits reach the cache once replicated
        return coord, None
    if replica_manager.topic(OFFSETS_TOPIC) is None:
        for p in range(config.offsets_topic_num_partitions):
            coord.complete_load(p, LoadedPartition())
        return coord, None
    return coord, loop.create_task(_load_all(coord))


async def _load_all(coord: GroupCoordinator) -> None:
    """Replay every partition, yielding to the loop every few batches so a large
    ``__consumer_offsets`` never stalls the broker while it loads."""
    manager = coord.manager
    for p in range(coord.config.offsets_topic_num_partitions):
        data = LoadedPartition()
        try:
            for i, batch in enumerate(manager.store.read_batches(p)):
                manager.replay_batch(data, p, batch)
                if i % LOAD_BATCHES_PER_TURN == LOAD_BATCHES_PER_TURN - 1:
                    await asyncio.sleep(0)
        except Exception:
            log.exception("failed to read __consumer_offsets-%d; loading what was read", p)
        coord.complete_load(p, data)
        await asyncio.sleep(0)
    log.info("group coordinator loaded %d groups", len(coord.groups))


def stop_group_coordinator(coord: GroupCoordinator, load: asyncio.Task[None] | None) -> None:
    if load is not None:
        load.cancel()
    coord.shutdown()
    if isinstance(coord.scheduler, LoopScheduler):
        coord.scheduler.shutdown()


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
