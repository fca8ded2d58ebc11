"""Bytes in and out per second for the console's overview.

The broker counts BytesIn and BytesOut per topic (``BrokerTopicStats``, the totals behind
Kafka's BytesInPerSec/BytesOutPerSec). The console samples those totals with the lag samples
(``http.console.lag.sample.interval.ms``) into two bounded rings: the all-topics totals for
the last hour (the overview's chart) and every topic's totals for the last ``RATE_WINDOW_MS``
(the per-topic rates in its table). Memory is bounded by the window over the interval; a
restart starts the history afresh, with a sample as the listener starts, so the first page
already shows the rates since then.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

HISTORY_MS = 3_600_000  # the chart: the last hour
RATE_WINDOW_MS = 10_000  # a topic's rate: over the last ten seconds (or the samples there are)
MIN_GAP_MS = 100  # samples closer than this replace the previous one


@dataclass(frozen=True)
class Totals:
    time_ms: int
    bytes_in: int
    bytes_out: int
    topics: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (in, out)


def _rate(newer: int, older: int, ms: int) -> float:
    return max(0, newer - older) * 1000 / ms if ms > 0 else 0.0


class ThroughputHistory:
    def __init__(self, broker: Broker, *, interval_ms: int, history_ms: int = HISTORY_MS) -> None:
        self.broker = broker
        self.history_ms = history_ms
        self.totals: deque[Totals] = deque(maxlen=history_ms // max(1, interval_ms) + 2)
        self.recent: deque[Totals] = deque(maxlen=RATE_WINDOW_MS // max(1, interval_ms) + 2)

    def sample(self, now_ms: int | None = None) -> None:
        stats = self.broker.replica_manager.topic_stats
        if stats is None:
            return
        now = self.broker.clock.milliseconds() if now_ms is None else now_ms
        a = stats.all_topics
        topics = {name: (t.bytes_in, t.bytes_out) for name, t in stats.topics().items()}
        for ring, s in ((self.totals, Totals(now, a.bytes_in, a.bytes_out)),
                        (self.recent, Totals(now, a.bytes_in, a.bytes_out, topics))):  # fmt: skip
            if len(ring) > 1 and now - ring[-1].time_ms < MIN_GAP_MS:
                ring[-1] = s  # (never the first: it is the rates' base)
            else:
                ring.append(s)
            while ring and ring[0].time_ms < now - (self.history_ms if ring is self.totals
                                                    else RATE_WINDOW_MS):  # fmt: skip
                ring.popleft()

    def series(self) -> dict[str, list[tuple[int, int]]]:
        """The chart's lines: bytes in and out per second between consecutive samples."""
        out: dict[str, list[tuple[int, int]]] = {"bytes in/s": [], "bytes out/s": []}
        for older, newer in itertools.pairwise(self.totals):
            ms = newer.time_ms - older.time_ms
            out["bytes in/s"].append((newer.time_ms, int(_rate(newer.bytes_in, older.bytes_in, ms))))
            out["bytes out/s"].append(
                (newer.time_ms, int(_rate(newer.bytes_out, older.bytes_out, ms))))
        return out

    def topic_rates(self) -> dict[str, tuple[float, float]]:
        """Each topic's bytes in and out per second over the recent samples."""
        if len(self.recent) < 2:
            return {}
        first, last = self.recent[0], self.recent[-1]
        ms = last.time_ms - first.time_ms
        out = {}
        for name, (b_in, b_out) in last.topics.items():
            in0, out0 = first.topics.get(name, (0, 0))
            out[name] = (_rate(b_in, in0, ms), _rate(b_out, out0, ms))
        return out
