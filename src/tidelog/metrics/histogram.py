"""A fixed-bucket latency histogram (Kafka's Yammer ``Histogram`` / ``Timer`` stand-in).

Observing is one ``bisect`` and two integer additions. Quantiles (the ``50thPercentile`` ...
``999thPercentile`` attributes the JMX exporter turns into ``quantile`` labels) are
interpolated from the buckets at scrape time, over the process lifetime: Kafka's reservoir
is biased towards the last five minutes, ours is not (use ``rate()`` on ``_sum``/``_count``
for recent means).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager

# Upper bounds in milliseconds: sub-millisecond resolution for local work, up to a minute
# for long polls.
BOUNDS_MS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500,
    1000, 2500, 5000, 10000, 30000, 60000,
)  # fmt: skip
_BOUNDS_NS: tuple[int, ...] = tuple(int(b * 1_000_000) for b in BOUNDS_MS)
# The quantiles Kafka's JMX histograms publish (50thPercentile ... 999thPercentile).
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
    ("0.999", 0.999),
)  # fmt: skip


class LatencyHistogram:
    __slots__ = ("count", "counts", "max_ns", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS_NS) + 1)
        self.count = 0
        self.sum_ns = 0
        self.max_ns = 0

    def observe_ns(self, ns: int) -> None:
        self.counts[bisect_left(_BOUNDS_NS, ns)] += 1
        self.count += 1
        self.sum_ns += ns
        if ns > self.max_ns:
            self.max_ns = ns

    @property
    def sum_ms(self) -> float:
        return self.sum_ns / 1_000_000

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile in ms, interpolated linearly inside its bucket (0 when empty)."""
        if self.count == 0:
            return 0.0
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.counts):
            if n and seen + n >= rank:
                lo = _BOUNDS_NS[i - 1] if i > 0 else 0
                hi = _BOUNDS_NS[i] if i < len(_BOUNDS_NS) else self.max_ns
                hi = min(hi, self.max_ns)
                frac = (rank - seen) / n
                return (lo + (max(hi, lo) - lo) * frac) / 1_000_000
            seen += n
        return self.max_ns / 1_000_000

    def quantiles(self) -> list[tuple[str, float]]:
        return [(label, self.quantile_ms(q)) for label, q in QUANTILES]


class LogFlushTimer:
    """Kafka's ``LogFlushStats.logFlushTimer``: one process-wide timer (Kafka's is static
    too), observed from the scheduler threads that flush, hence the lock (flushes are rare)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.histogram = LatencyHistogram()

    @contextmanager
    def time(self) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            elapsed = time.perf_counter_ns() - start
            with self._lock:
                self.histogram.observe_ns(elapsed)

    def snapshot(self) -> LatencyHistogram:
        copy = LatencyHistogram()
        with self._lock:
            h = self.histogram
            copy.counts = list(h.counts)
            copy.count, copy.sum_ns, copy.max_ns = h.count, h.sum_ns, h.max_ns
        return copy


LOG_FLUSH_STATS = LogFlushTimer()
