"""Plugs the group coordinator into the asyncio broker.

``start_group_coordinator(broker)`` builds the coordinator (config from the broker's
properties, storage over the broker's logs, timers on the event loop) and loads
``__consumer_offsets`` in the background, one partition per loop turn, answering
COORDINATOR_LOAD_IN_PROGRESS meanwhile. Handlers call ``coordinator_for(broker)``, which
starts it on first use if the broker did not call the start hook.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tidelog.server.group.config import GroupConfig
from tidelog.server.group.coordinator import GroupCoordinator
from tidelog.server.group.log_store import LogOffsetsStore
from tidelog.server.group.member import JoinResult, SyncResult
from tidelog.server.group.metadata_manager import LoadedPartition
from tidelog.util.scheduler import ScheduledTask, TaskFn

log = logging.getLogger(__name__)

ATTR = "group_coordinator"
LOAD_BATCHES_PER_TURN = 64


class LoopScheduler:
    """The ``Scheduler`` protocol on an asyncio loop: tasks run on the loop's thread, so the
    coordinator needs no locks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stopped = False

    def schedule(
        self, name: str, fn: TaskFn, delay_ms: int = 0, period_ms: int | None = None
    ) -> ScheduledTask:
        task = ScheduledTask(name, fn, 0, period_ms)
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


def start_group_coordinator(broker: Any) -> GroupCoordinator:
    existing = getattr(broker, ATTR, None)
    if existing is not None:
        return existing
    config = GroupConfig.from_props(broker.config.originals)
    loop = asyncio.get_running_loop()
    coord = GroupCoordinator(
        config,
        clock=broker.clock,
        scheduler=LoopScheduler(loop),
        store=LogOffsetsStore(broker.replica_manager, config),
        node_id=broker.node_id,
    )
    coord.startup(load=False)
    setattr(broker, ATTR, coord)
    broker._group_load_task = loop.create_task(_load_all(coord))
    return coord


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


def stop_group_coordinator(broker: Any) -> None:
    coord: GroupCoordinator | None = getattr(broker, ATTR, None)
    if coord is None:
        return
    task = getattr(broker, "_group_load_task", None)
    if task is not None:
        task.cancel()
    coord.shutdown()
    if isinstance(coord.scheduler, LoopScheduler):
        coord.scheduler.shutdown()
    setattr(broker, ATTR, None)


def coordinator_for(broker: Any) -> GroupCoordinator:
    coord = getattr(broker, ATTR, None)
    return coord if coord is not None else start_group_coordinator(broker)


def join_future() -> tuple[asyncio.Future[JoinResult], Any]:
    fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

    def done(r: JoinResult) -> None:
        if not fut.done():
            fut.set_result(r)

    return fut, done


def sync_future() -> tuple[asyncio.Future[SyncResult], Any]:
    fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def done(r: SyncResult) -> None:
        if not fut.done():
            fut.set_result(r)

    return fut, done
