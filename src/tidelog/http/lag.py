"""Consumer lag over time for the console's charts: samples of every group's lag, taken
every ``http.console.lag.sample.interval.ms`` (and when a group page is drawn), kept for
``http.console.lag.history.ms``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import state

if TYPE_CHECKING:
    from tidelog.server.broker import Broker


@dataclass
class LagSample:
    time_ms: int
    total: int
    partitions: dict[str, int] = field(default_factory=dict)


class LagHistory:
    def __init__(self, broker: Broker, *, history_ms: int, min_gap_ms: int = 100) -> None:
        self.broker = broker
        self.history_ms = history_ms
        self.min_gap_ms = min_gap_ms
        self.samples: dict[str, deque[LagSample]] = {}

    def sample(self, now_ms: int | None = None) -> None:
        now = self.broker.clock.milliseconds() if now_ms is None else now_ms
        by_group: dict[str, LagSample] = {}
        for pl in state.group_lags(self.broker, now_ms=now, time_lag=False):  # no reads
            s = by_group.setdefault(pl.group, LagSample(now, 0))
            s.total += pl.lag
            s.partitions[f"{pl.topic}-{pl.partition}"] = pl.lag
        for gid in state.groups(self.broker):
            by_group.setdefault(gid, LagSample(now, 0))
        for gid, s in by_group.items():
            q = self.samples.setdefault(gid, deque())
            if q and now - q[-1].time_ms < self.min_gap_ms:
                q[-1] = s  # a burst of page loads replaces, not piles up
            else:
                q.append(s)
            while q and q[0].time_ms < now - self.history_ms:
                q.popleft()
        for gid in set(self.samples) - set(by_group):
            del self.samples[gid]

    def series(self, group_id: str) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = {"total": []}
        for s in self.samples.get(group_id, ()):
            out["total"].append((s.time_ms, s.total))
            for name, lag in s.partitions.items():
                out.setdefault(name, []).append((s.time_ms, lag))
        return out
