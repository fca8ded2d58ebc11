"""Kafka's CoordinatorTimer on the event loop: a coordinator's timed operations (session
expiries, retention and timeout checks) run on the loop's thread, so coordinators need no
locks. It is the ``Scheduler`` protocol (``tidelog.util.scheduler``): ``schedule`` runs ``fn``
after ``delay_ms`` and then every ``period_ms``; an exception in one run is logged and does
not cancel the next; ``shutdown`` stops every task at once (the coordinator stopped). With a
clock, a task's ``next_ms`` is when it is first due (a share-partition's acquisition lock
tells its age by it)."""

from __future__ import annotations

import asyncio
import logging

from tidelog.util.clock import Clock
from tidelog.util.scheduler import ScheduledTask, TaskFn

log = logging.getLogger(__name__)


class CoordinatorTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock | None = None,
                 name: str = "group coordinator") -> None:
        self.loop = loop
        self.clock = clock
        self.name = name
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
                log.exception("%s task %s failed", self.name, name)
            task.runs += 1
            if task.periodic and not task.cancelled:
                self.loop.call_later((period_ms or 0) / 1000, run)

        self.loop.call_later(max(delay_ms, 0) / 1000, run)
        return task

    def startup(self) -> None:
        self.stopped = False

    def shutdown(self) -> None:
        self.stopped = True
