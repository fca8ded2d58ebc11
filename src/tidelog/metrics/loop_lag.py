"""How late the event loop runs what is due, and what held it.

``LagProbe``, the broker's, is a chain of timer callbacks that asks to wake every
``LAG_INTERVAL_S`` and observes how late it woke into ``LOOP_LAG`` (exported on ``/metrics``
as ``tidelog_eventloop_lag_ms``): a callback that holds the loop for 20 ms shows as a wake up
to 20 ms late. The histogram is over the process lifetime, like the other tidelog
histograms. The probe backs off while its loop is idle (``LAG_IDLE_INTERVAL_S``): each wake
costs the process 50-130 us of CPU on a busy 2-core machine, over 1% of a core at 100 wakes
a second, which was half of what an idle broker -- or one serving a consumer by sendfile --
spent.

``StallRecorder`` is for benchmarks and investigations: while installed it times every
callback any event loop of the process runs (asyncio's ``Handle._run``) and every garbage
collection, and keeps those longer than a threshold with what ran: the coroutine a task was
stepping (its function and the line it stopped at) or the callback's qualified name, or
``gc gen N``. It costs two clock reads per callback, so the broker never installs it itself.
It sees asyncio's own loops only: uvloop's callbacks are not Python objects to wrap.

``StallWatchdog`` works with any loop (uvloop too): a thread pings the loop every
``threshold`` and, while a ping waits, samples the loop thread's stack; a ping answered later
than the threshold is kept as a stall with the stack seen most (the innermost tidelog frames),
the CPU time the loop's thread got meanwhile and, on Linux, how long it sat runnable in the
kernel's run queue: ``classify`` tells a loop that worked from one that waited for a core
(other processes or threads had the CPUs) and one that waited for the GIL or in a system call.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from asyncio import events
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CoroutineType, FrameType, TracebackType
from typing import Any

from .histogram import LatencyHistogram

LAG_INTERVAL_S = 0.01
LAG_IDLE_INTERVAL_S = 1.0
# the loop's thread on CPU for at least this share of the time since the last wake: busy
LAG_BUSY_SHARE = 0.05
LOOP_LAG = LatencyHistogram()


class LagProbe:
    """Observes the loop's lateness every ``interval_s`` from ``start`` until ``cancel``.
    With ``idle_interval_s``, a wake that finds the loop idle since the last one (its thread
    on CPU less than ``LAG_BUSY_SHARE`` of the time, and not late by more than an interval
    through its own work) doubles the wait, up to ``idle_interval_s``; a busy one goes back
    to ``interval_s``. A chain of timer callbacks rather than a task sleeping in
    ``asyncio.sleep``: without the task, the future and the extra turn of the loop each
    sleep costs (a future's result wakes its task by ``call_soon``), 25-40 us less CPU per
    wake (an idle loop's wake cost 68-102 us as a task, 44-64 as this chain), 0.5-0.8 us per
    record at the broker's 100 wakes a second under a load of 5,000 one-record requests a
    second."""

    __slots__ = ("_cpu", "_due", "_handle", "_hist", "_idle", "_interval", "_loop",
                 "_start", "_wait")

    def __init__(self, hist: LatencyHistogram = LOOP_LAG, interval_s: float = LAG_INTERVAL_S,
                 idle_interval_s: float | None = None) -> None:
        self._hist = hist
        self._interval = interval_s
        self._idle = idle_interval_s
        self._wait = interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._start = self._due = 0.0
        self._cpu = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._cpu = time.thread_time()
        self._arm(loop.time())

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, now: float) -> None:
        self._start = now
        self._due = now + self._wait
        self._handle = self._loop.call_at(self._due, self._tick)  # type: ignore[union-attr]

    def _tick(self) -> None:
        now = self._loop.time()  # type: ignore[union-attr]
        late = now - self._due
        self._hist.observe_ns(int(late * 1e9) if late > 0 else 0)
        if self._idle is not None:
            spent = time.thread_time()
            used, self._cpu = spent - self._cpu, spent
            self._wait = next_wait(self._wait, self._interval, self._idle, now - self._start,
                                   max(0.0, late), used)
        self._arm(now)


def next_wait(wait: float, interval_s: float, idle_interval_s: float, elapsed: float,
              late: float, used: float) -> float:
    """The monitor's next wait after a wake ``elapsed`` seconds after the last, ``late`` past
    its due time, the loop's thread having used ``used`` seconds of CPU meanwhile: back to
    ``interval_s`` when the loop was busy (on CPU at least ``LAG_BUSY_SHARE`` of the time, or
    late through its own work: not for a core, as a loaded machine makes every wake late),
    else twice the last wait, up to ``idle_interval_s``."""
    busy = used >= LAG_BUSY_SHARE * elapsed or (late > interval_s and used >= late / 2)
    return interval_s if busy else min(wait * 2, idle_interval_s)


@dataclass(frozen=True, slots=True)
class Stall:
    started_ns: int  # time.perf_counter_ns() when the callback or collection began
    duration_ns: int
    what: str
    cpu_ns: int = -1  # CPU time the loop's thread got meanwhile (-1: not measured); far
    # below the duration, the thread was waiting (for a core, or the GIL), not working
    queued_ns: int = -1  # time it was runnable but waited for a core meanwhile (the
    # kernel's run-queue delay, Linux schedstat; -1: not measured)


def describe(callback: Callable[..., object]) -> str:
    """What a loop callback runs: a task's coroutine (function and current line), or the
    callback's qualified name."""
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        name = getattr(coro, "__qualname__", type(coro).__name__)
        if isinstance(coro, CoroutineType) and frame is not None:
            code = frame.f_code
            return f"task {name} ({code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})"
        return f"task {name}"
    func = getattr(callback, "func", callback)  # functools.partial
    module = getattr(func, "__module__", None) or ""
    return f"{module}.{getattr(func, '__qualname__', repr(func))}".lstrip(".")


@dataclass
class StallRecorder:
    """Records every loop callback and garbage collection over ``threshold_ms`` while
    installed (``with StallRecorder() as r:``); ``stalls`` in the order they ended."""

    threshold_ms: float = 1.0
    stalls: list[Stall] = field(default_factory=list)
    _original: Callable[[events.Handle], None] | None = None
    _gc_started: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> StallRecorder:
        self.install()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.uninstall()

    def install(self) -> None:
        if self._original is not None:
            raise RuntimeError("already installed")
        original = events.Handle._run
        threshold = int(self.threshold_ms * 1e6)
        clock, keep = time.perf_counter_ns, self._keep

        def timed_run(handle: events.Handle) -> None:
            t0 = clock()
            try:
                original(handle)
            finally:
                took = clock() - t0
                if took > threshold:
                    keep(t0, took, describe(handle._callback))  # type: ignore[attr-defined]

        self._original = original
        setattr(events.Handle, "_run", timed_run)  # noqa: B010 (patching a method)
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._original is None:
            return
        setattr(events.Handle, "_run", self._original)  # noqa: B010
        self._original = None
        gc.callbacks.remove(self._on_gc)

    def _keep(self, started_ns: int, duration_ns: int, what: str) -> None:
        with self._lock:
            self.stalls.append(Stall(started_ns, duration_ns, what))

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter_ns()
            return
        took = time.perf_counter_ns() - self._gc_started
        if took > self.threshold_ms * 1e6:
            self._keep(self._gc_started, took, f"gc gen {info.get('generation')}")

    def summary(self) -> list[tuple[str, int, float, float]]:
        """(what, count, total ms, max ms) per culprit, the largest total first."""
        with self._lock:
            return summarize(self.stalls)


def describe_stack(frame: FrameType | None, depth: int = 3) -> str:
    """The innermost ``depth`` frames of tidelog's own code on a stack (file:function:line,
    innermost first) and the innermost frame outside it they called; a stack without
    tidelog code by its innermost frame."""
    parts: list[str] = []
    innermost = ""
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        path = code.co_filename
        where = f"{code.co_name}:{frame.f_lineno}"
        if "/tidelog/" in path and "/metrics/loop_lag.py" not in path:
            parts.append(f"{path.rsplit('/tidelog/', 1)[-1]}:{where}")
        elif not parts and not innermost:
            innermost = f"{path.rsplit('/', 1)[-1]}:{where}"
        frame = frame.f_back
    if not parts:
        return innermost or "no Python frame"
    return " < ".join(parts) + (f" (in {innermost})" if innermost else "")


@dataclass
class StallWatchdog:
    """Pings ``loop`` from a thread; pings answered later than ``threshold_ms`` are kept in
    ``stalls`` with the loop thread's most sampled stack. Use ``with StallWatchdog(loop):``
    (the loop must be running in another thread)."""

    loop: asyncio.AbstractEventLoop
    loop_thread: int  # threading.get_ident() of the thread running the loop
    threshold_ms: float = 1.0
    loop_native_id: int = 0  # its threading.get_native_id(): run-queue delay measured
    stalls: list[Stall] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    _switch_interval: float = 0.0

    def __enter__(self) -> StallWatchdog:
        # the watchdog needs the GIL to ping and sample while the loop's thread holds it:
        # ask the interpreter to hand it over well within the threshold
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, self.threshold_ms / 4000))
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sys.setswitchinterval(self._switch_interval)

    def _run(self) -> None:
        threshold_s = self.threshold_ms / 1000
        cpu = time.pthread_getcpuclockid(self.loop_thread)
        queued = _run_queue_clock(self.loop_native_id)
        while not self._stop.is_set():
            answered = threading.Event()
            t0, c0, q0 = time.perf_counter_ns(), time.clock_gettime_ns(cpu), queued()
            try:
                self.loop.call_soon_threadsafe(answered.set)
            except RuntimeError:  # the loop closed
                return
            seen: Counter[str] = Counter()
            while not answered.wait(threshold_s / 2):
                seen[describe_stack(sys._current_frames().get(self.loop_thread))] += 1
                if self._stop.is_set():
                    return
            took, used = time.perf_counter_ns() - t0, time.clock_gettime_ns(cpu) - c0
            if took > threshold_s * 1e9:
                what = seen.most_common(1)[0][0] if seen else "between samples"
                # the kernel adds a wait for a core when it ends: one that began before
                # the ping counts whole, so at most the stall's own length is kept
                waited = min(queued() - q0, took) if q0 >= 0 else -1
                self.stalls.append(Stall(t0, took, what, used, waited))
            self._stop.wait(threshold_s)

    def summary(self) -> list[tuple[str, int, float, float]]:
        """(what, count, total ms, max ms) per culprit, the largest total first."""
        return summarize(self.stalls)


def summarize(stalls: list[Stall]) -> list[tuple[str, int, float, float]]:
    """(what, count, total ms, max ms) per culprit, the largest total first."""
    by: dict[str, list[int]] = {}
    for s in list(stalls):
        by.setdefault(s.what, []).append(s.duration_ns)
    rows = [(what, len(d), sum(d) / 1e6, max(d) / 1e6) for what, d in by.items()]
    return sorted(rows, key=lambda r: -r[2])


def _run_queue_clock(native_id: int) -> Callable[[], int]:
    """A reader of the nanoseconds thread ``native_id`` has spent runnable but not running
    (the second field of Linux's schedstat); one that says -1 where there is none."""
    path = f"/proc/self/task/{native_id}/schedstat"

    def read() -> int:
        try:
            with open(path, "rb") as f:
                return int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            return -1

    return read if native_id and read() >= 0 else lambda: -1


def classify(stalls: list[Stall], share: float = 0.5
             ) -> tuple[list[Stall], list[Stall], list[Stall]]:
    """(the loop's thread mostly on a CPU, mostly runnable in the run queue -- waiting for a
    core other work had --, the rest: waiting for the GIL or in a blocking system call).
    Without a run-queue measure a stall that is not working counts in the last group."""
    busy, idle = working(stalls, share)
    queued = [s for s in idle if s.queued_ns >= share * s.duration_ns]
    return busy, queued, [s for s in idle if s.queued_ns < share * s.duration_ns]


def working(stalls: list[Stall], share: float = 0.5) -> tuple[list[Stall], list[Stall]]:
    """(stalls the loop's thread spent mostly on the CPU, the others): a stall of the
    second kind waited for a core or the GIL (other threads, other processes)."""
    busy = [s for s in stalls if s.cpu_ns < 0 or s.cpu_ns >= share * s.duration_ns]
    return busy, [s for s in stalls if s not in busy]
