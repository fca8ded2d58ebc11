"""Clocks are passed in, never read from globals, so time-dependent behaviour is testable."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int: ...

    def nanoseconds(self) -> int: ...

    def sleep(self, ms: int) -> None: ...


class SystemClock:
    __slots__ = ()  # (no dict: its methods are found on the type alone, natively too)

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def sleep(self, ms: int) -> None:
        time.sleep(ms / 1000)


class ManualClock:
    """Kafka's MockTime: time moves only when a test says so.

    ``sleep``/``advance`` move both clocks and then run the listeners (a manual scheduler
    registers one to fire the tasks that became due).
    """

    def __init__(self, now_ms: int = 1_700_000_000_000, nanos: int = 0) -> None:
        self._ms = now_ms
        self._ns = nanos
        self._lock = threading.Lock()
        self._listeners: list[object] = []

    def milliseconds(self) -> int:
        return self._ms

    def nanoseconds(self) -> int:
        return self._ns

    def sleep(self, ms: int) -> None:
        self.advance(ms)

    def advance(self, ms: int) -> None:
        with self._lock:
            self._ms += ms
            self._ns += ms * 1_000_000
        for listener in list(self._listeners):
            listener()  # type: ignore[operator]

    def add_listener(self, fn: object) -> None:
        self._listeners.append(fn)


SYSTEM_CLOCK = SystemClock()
