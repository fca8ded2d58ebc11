"""Schedulers for the broker's background work (Kafka's Scheduler / KafkaScheduler / MockScheduler).

Storage code never starts threads or reads the wall clock itself: it asks a ``Scheduler`` to
run ``fn`` after ``delay_ms`` (and then every ``period_ms``). Production uses
``KafkaScheduler`` (a small pool of daemon threads); tests use ``ManualScheduler``, which runs
due tasks synchronously whenever its ``ManualClock`` is advanced, so retention, flushing and
delayed deletes are tested without sleeping.

Periodic tasks run at a fixed rate (Kafka's ``scheduleAtFixedRate``): the next run is due
``period_ms`` after the previous *due* time, a task never overlaps itself, and an exception in a
task is logged and does not cancel later runs.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from tidelog.util.clock import Clock, ManualClock, SystemClock

log = logging.getLogger(__name__)

TaskFn = Callable[[], object]
_MAX_WAIT_MS = 3_600_000


class ScheduledTask:
    """A handle on a scheduled task; ``cancel()`` stops future runs (a running one finishes)."""

    def __init__(self, name: str, fn: TaskFn, next_ms: int, period_ms: int | None) -> None:
        self.name = name
        self.fn = fn
        self.next_ms = next_ms
        self.period_ms = period_ms
        self.cancelled = False
        self.runs = 0

    @property
    def periodic(self) -> bool:
        return self.period_ms is not None and self.period_ms > 0

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        return f"ScheduledTask({self.name!r}, next_ms={self.next_ms}, period_ms={self.period_ms})"


class Scheduler(Protocol):
    def schedule(
        self, name: str, fn: TaskFn, delay_ms: int = 0, period_ms: int | None = None
    ) -> ScheduledTask: ...

    def startup(self) -> None: ...

    def shutdown(self) -> None: ...


def _run_logged(task: ScheduledTask) -> BaseException | None:
    """Run one task; an exception is logged (never kills the scheduler) and returned."""
    try:
        task.fn()
        return None
    except Exception as exc:  # a failing task must not stop the other tasks
        log.error("Uncaught exception in scheduled task '%s'", task.name, exc_info=True)
        return exc
    finally:
        task.runs += 1


class _TaskQueue:
    """A heap of tasks ordered by due time, then by scheduling order (FIFO among equals)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, ScheduledTask]] = []
        self._seq = itertools.count()

    def push(self, task: ScheduledTask) -> None:
        heapq.heappush(self._heap, (task.next_ms, next(self._seq), task))

    def peek(self) -> ScheduledTask | None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][2] if self._heap else None

    def pop(self) -> ScheduledTask:
        return heapq.heappop(self._heap)[2]

    def clear(self) -> None:
        self._heap.clear()

    def tasks(self) -> list[ScheduledTask]:
        return [t for _, _, t in sorted(self._heap) if not t.cancelled]


class KafkaScheduler:
    """A pool of ``threads`` daemon threads running tasks when they are due (SystemClock)."""

    def __init__(
        self,
        threads: int = 1,
        thread_name_prefix: str = "kafka-scheduler-",
        clock: Clock | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"scheduler needs at least one thread, got {threads}")
        self._threads_wanted = threads
        self._prefix = thread_name_prefix
        self._clock = clock if clock is not None else SystemClock()
        self._queue = _TaskQueue()
        self._cond = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._running = False

    def _now_ms(self) -> int:
        # Monotonic time: a wall-clock jump must not fire or stall every task at once.
        return self._clock.nanoseconds() // 1_000_000

    def startup(self) -> None:
        with self._cond:
            if self._running:
                raise RuntimeError("This scheduler has already been started")
            self._running = True
            for i in range(self._threads_wanted):
                t = threading.Thread(target=self._work, name=f"{self._prefix}{i}", daemon=True)
                self._workers.append(t)
                t.start()

    def is_started(self) -> bool:
        return self._running

    def shutdown(self) -> None:
        """Kafka's (its executor's shutdown, then awaitTermination): periodic tasks and
        those not due yet are dropped; the one-shot tasks already due still run (a log's
        flush after a roll, a leader-epoch checkpoint's write), running ones finish; then
        the threads are joined. Nothing is scheduled once it is called."""
        with self._cond:
            if not self._running:
                return
            self._running = False
            now = self._now_ms()
            due = [t for t in self._queue.tasks() if not t.periodic and t.next_ms <= now]
            self._queue.clear()
            for task in due:
                self._queue.push(task)
            self._cond.notify_all()
        me = threading.current_thread()
        for t in self._workers:
            if t is not me:
                t.join()
        self._workers.clear()

    def schedule(
        self, name: str, fn: TaskFn, delay_ms: int = 0, period_ms: int | None = None
    ) -> ScheduledTask:
        task = ScheduledTask(name, fn, self._now_ms() + max(0, delay_ms), period_ms)
        with self._cond:
            if not self._running:
                # Kafka ignores work scheduled on a stopped scheduler (e.g. during shutdown).
                log.debug("Scheduler is not running; ignoring task '%s'", name)
                task.cancel()
                return task
            self._queue.push(task)
            self._cond.notify()
        return task

    def _next_due(self) -> ScheduledTask | None:
        """Under the lock: wait for a due task; once the scheduler stops, the due ones left
        (``shutdown``), then None."""
        while True:
            head = self._queue.peek()
            if not self._running:
                return None if head is None else self._queue.pop()
            if head is None:
                self._cond.wait()
                continue
            wait_ms = head.next_ms - self._now_ms()
            if wait_ms <= 0:
                return self._queue.pop()
            # Capped: Condition.wait overflows on Long.MAX-style "never" delays.
            self._cond.wait(min(wait_ms, _MAX_WAIT_MS) / 1000)

    def _work(self) -> None:
        while True:
            with self._cond:
                task = self._next_due()
            if task is None:
                return
            _run_logged(task)
            if task.periodic and not task.cancelled:
                assert task.period_ms is not None
                task.next_ms += task.period_ms
                with self._cond:
                    if self._running:
                        self._queue.push(task)
                        self._cond.notify()


class ManualScheduler:
    """Kafka's MockScheduler: due tasks run, in due-time order, whenever the clock advances.

    Scheduling a task that is already due (delay 0) runs it at once, like Kafka's. A periodic
    task that fell several periods behind runs once per missed period (fixed rate). Exceptions
    are logged and kept in ``errors`` so a test can assert on them.
    """

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue = _TaskQueue()
        self._lock = threading.RLock()
        self._ticking = False
        self._stopped = False
        self.errors: list[tuple[str, BaseException]] = []
        clock.add_listener(self.tick)

    def startup(self) -> None:
        self._stopped = False

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            self._queue.clear()

    def is_started(self) -> bool:
        return not self._stopped

    def schedule(
        self, name: str, fn: TaskFn, delay_ms: int = 0, period_ms: int | None = None
    ) -> ScheduledTask:
        task = ScheduledTask(name, fn, self.clock.milliseconds() + max(0, delay_ms), period_ms)
        with self._lock:
            if self._stopped:
                task.cancel()
                return task
            self._queue.push(task)
        self.tick()
        return task

    def tasks(self) -> list[ScheduledTask]:
        """Pending tasks in due order (for tests and debugging)."""
        with self._lock:
            return self._queue.tasks()

    def tick(self) -> None:
        """Run every task due at the clock's current time (re-entrant calls are no-ops)."""
        with self._lock:
            if self._ticking:
                return  # a task scheduled from inside a task runs in the outer loop
            self._ticking = True
            try:
                self._run_due()
            finally:
                self._ticking = False

    def _run_due(self) -> None:
        while True:
            head = self._queue.peek()
            if head is None or head.next_ms > self.clock.milliseconds():
                return
            task = self._queue.pop()
            exc = _run_logged(task)
            if exc is not None:
                self.errors.append((task.name, exc))
            if task.periodic and not task.cancelled and not self._stopped:
                assert task.period_ms is not None
                task.next_ms += task.period_ms
                self._queue.push(task)
