"""A log2-bucket latency histogram (Kafka's Yammer ``Histogram`` / ``Timer`` stand-in).

Observing is ``counts[ns.bit_length()] += 1`` and a sum: bucket ``k`` holds durations in
[2^(k-1), 2^k) nanoseconds (about a factor of two of resolution, from 1 ns to centuries),
so the hot path does no search at all. Quantiles (the ``50thPercentile`` ...
``999thPercentile`` attributes the JMX exporter turns into ``quantile`` labels) are
interpolated from the buckets at scrape time, over the process lifetime: Kafka's reservoir
is biased towards the last five minutes, ours is not (use ``rate()`` on ``_sum``/``_count``
for recent means).
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Iterator, MutableSequence
from contextlib import contextmanager

BUCKETS = 64  # ns.bit_length() of any duration this process can measure
# The quantiles Kafka's JMX histograms publish (50thPercentile ... 999thPercentile).
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
    ("0.999", 0.999),
)  # fmt: skip


class LatencyHistogram:
    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.sum_ns = 0

    def observe_ns(self, ns: int) -> None:
        self.counts[ns.bit_length()] += 1
        self.sum_ns += ns

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def sum_ms(self) -> float:
        return self.sum_ns / 1_000_000

    def quantile_ms(self, q: float) -> float:
        """The ``q`` quantile in ms, interpolated linearly inside its bucket (0 when empty)."""
        counts = list(self.counts)  # one consistent copy (other threads may observe)
        total = sum(counts)
        if total == 0:
            return 0.0
        rank = q * total
        seen = 0
        for k, n in enumerate(counts):
            if n and seen + n >= rank:
                lo = (1 << (k - 1)) if k > 0 else 0
                hi = 1 << k
                return (lo + (hi - lo) * (rank - seen) / n) / 1_000_000
            seen += n
        return 0.0

    def quantiles(self) -> list[tuple[str, float]]:
        return [(label, self.quantile_ms(q)) for label, q in QUANTILES]


CELLS = BUCKETS + 1  # a histogram in a flat int64 table: its counts, then its sum


def histogram_table(histograms: int) -> array[int]:
    """Zeroed int64 cells for ``histograms`` StageHistograms side by side."""
    return array("q", bytes(8 * CELLS * histograms))


class StageHistogram(LatencyHistogram):
    """A LatencyHistogram whose counts and sum live in a table shared with others (at
    ``index * CELLS`` of a ``histogram_table``), so that one call can observe
    several (metrics.requests); readers see the same ``counts`` list, ``sum_ns`` and
    quantiles as a LatencyHistogram's."""

    __slots__ = ("_base", "_cells")

    def __init__(self, cells: MutableSequence[int], index: int) -> None:
        self._cells = cells
        self._base = index * CELLS

    @property
    def counts(self) -> list[int]:
        return list(self._cells[self._base : self._base + BUCKETS])

    @counts.setter
    def counts(self, counts: list[int]) -> None:
        for k, n in enumerate(counts):
            self._cells[self._base + k] = n

    @property
    def sum_ns(self) -> int:
        return self._cells[self._base + BUCKETS]

    @sum_ns.setter
    def sum_ns(self, ns: int) -> None:
        self._cells[self._base + BUCKETS] = ns

    def observe_ns(self, ns: int) -> None:
        k = ns.bit_length()
        if k >= BUCKETS:  # the sum's cell, or the next histogram's
            raise OverflowError(f"{ns} ns is outside int64")
        cells, base = self._cells, self._base
        cells[base + k] += 1
        cells[base + BUCKETS] += ns


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
            copy.sum_ns = h.sum_ns
        return copy


LOG_FLUSH_STATS = LogFlushTimer()
