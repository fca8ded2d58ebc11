"""The event loop thread's short slice, kept while the loop mostly sleeps (``tidelog serve``).

A short slice on the loop's thread (server/sched_slice.py) brings its wakes ahead of a busy
neighbour: what a broker answering a steady rate on a shared machine needs. A loop busy
without a pause (a producer at the machine's ceiling) is preempted more often with it and
answers less. So once a second the governor reads the loop thread's CPU time
(``time.thread_time``, on the loop's own thread): over ``max_busy`` of a core since the last
reading, the kernel's slice is put back; under half of that, the short one is asked for
again. The halfway mark keeps a load near the mark from switching every second.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from tidelog.server.sched_slice import (
    loop_slice_max_busy,
    loop_slice_us,
    set_thread_slice,
    thread_slice_us,
)

log = logging.getLogger(__name__)

INTERVAL_S = 1.0


class SliceGovernor:
    """Switches the calling loop thread between ``slice_us`` and the kernel's slice by how
    busy the thread was (``check``, every ``interval_s`` once ``start``-ed)."""

    def __init__(self, slice_us: int, max_busy: float, *, interval_s: float = INTERVAL_S,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 wall_clock: Callable[[], float] = time.monotonic,
                 apply: Callable[[int], None] = set_thread_slice) -> None:
        self.slice_us = slice_us
        self.max_busy = max_busy
        self.interval_s = interval_s
        self._cpu_clock = cpu_clock
        self._wall_clock = wall_clock
        self._apply = apply  # the slice in µs, 0 for the kernel's; OSError if refused
        self.short = True  # the short slice is on (tune_loop_slice asked for it first)
        self.switches = 0
        self.stopped = False
        self._last = (cpu_clock(), wall_clock())
        self._handle: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Checked every ``interval_s`` on ``loop``, the thread's own, from now on."""
        self._last = (self._cpu_clock(), self._wall_clock())
        self._handle = loop.call_later(self.interval_s, self._tick, loop)

    def stop(self) -> None:
        self.stopped = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.check()
        if not self.stopped:
            self._handle = loop.call_later(self.interval_s, self._tick, loop)

    def check(self) -> float:
        """The share of a core the thread used since the last check; the slice switched if
        that crossed its mark."""
        cpu, wall = self._cpu_clock(), self._wall_clock()
        last_cpu, last_wall = self._last
        if wall <= last_wall:  # no time passed (a clock that did not move): nothing to judge
            return 0.0
        self._last = (cpu, wall)
        busy = (cpu - last_cpu) / (wall - last_wall)
        if self.short and busy > self.max_busy:
            self._switch(0, busy)
        elif not self.short and busy < self.max_busy / 2:
            self._switch(self.slice_us, busy)
        return busy

    def _switch(self, slice_us: int, busy: float) -> None:
        try:
            self._apply(slice_us)
        except OSError as exc:  # refused now (a sandbox's policy changed): governed no more
            log.warning("event loop thread's scheduler slice: %s; left as it is", exc)
            self.stop()
            return
        self.short = slice_us != 0
        self.switches += 1
        log.debug("event loop thread %.0f%% busy: scheduler slice %s", busy * 100,
                  f"{slice_us} µs" if slice_us else "the kernel's")


def loop_slice_governor(environ: dict[str, str] | None = None) -> SliceGovernor | None:
    """After ``tune_loop_slice`` on this thread: the governor of the short slice it applied,
    or None (the kernel's slice kept, or ``TIDELOG_LOOP_SLICE_BUSY=1``: the short slice
    however busy). ValueError for a value out of bounds."""
    max_busy = loop_slice_max_busy(environ)
    slice_us = loop_slice_us(environ)
    if slice_us == 0 or max_busy >= 1 or thread_slice_us() != slice_us:
        return None
    return SliceGovernor(slice_us, max_busy)
