"""Kafka's Throttler: keep an observed rate (bytes/s) under a target by sleeping.

Every ``check_interval_ms`` worth of elapsed time, if the rate since the period start is above
the target, sleep long enough to bring it back to the target. Time comes from the injected
clock, so with a ManualClock a test sees the exact sleep it asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidelog.util.clock import Clock

NS_PER_SEC = 1_000_000_000
NS_PER_MS = 1_000_000


class Throttler:
    def __init__(
        self,
        desired_rate_per_sec: float | Callable[[], float],
        clock: Clock,
        *,
        check_interval_ms: int = 300,
    ) -> None:
        if callable(desired_rate_per_sec):
            self._rate = desired_rate_per_sec
        else:
            fixed = float(desired_rate_per_sec)
            self._rate = lambda: fixed
        self._clock = clock
        self._check_interval_ns = check_interval_ms * NS_PER_MS
        self._lock = threading.Lock()
        self._period_start_ns = clock.nanoseconds()
        self._observed = 0.0
        self.total_sleep_ms = 0

    def maybe_throttle(self, observed: float) -> int:
        """Account ``observed`` units; returns the milliseconds slept (0 if none)."""
        desired = self._rate()
        with self._lock:
            self._observed += observed
            now = self._clock.nanoseconds()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns <= self._check_interval_ns or self._observed <= 0:
                return 0
            slept = 0
            rate = self._observed * NS_PER_SEC / elapsed_ns
            if rate > desired:
                sleep_ms = round(self._observed / (desired / 1000.0) - elapsed_ns // NS_PER_MS)
                if sleep_ms > 0:
                    self._clock.sleep(sleep_ms)
                    slept = sleep_ms
                    self.total_sleep_ms += sleep_ms
            self._period_start_ns = self._clock.nanoseconds()
            self._observed = 0.0
            return slept
