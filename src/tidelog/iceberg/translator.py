"""A topic's translator at one broker, its log side: each flush reads the committed records
of the partitions this broker leads, as bytes, from where the table says each partition is,
and hands them to the table side (``table_writer``: decode, evolve, commit; on the
translation thread, or in the translation worker process), which appends them to the topic's
table in one Iceberg commit (undecodable ones to the DLQ table first). Flushes run on the
translation thread, never on the event loop: produce never waits.

Resuming is reading the table: every flush starts each partition at the next offset the
table's current snapshot records for it (the log start offset for a partition the table has
never seen), so a restart or a leadership move continues exactly there. Where the table is
is asked of the table side only when the answer in hand is not valid: the partitions led
here or their leader epochs changed, or the last flush failed or lost a race."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from tidelog.util.topic_partition import TopicPartition

from .file_ranges import FileRange, merge, read_ranges
from .log_source import PartitionSource
from .maintenance import Expired
from .table_writer import FlushResult, PartitionRead, Position, TopicSettings

log = logging.getLogger(__name__)

__all__ = ["FlushResult", "TableSide", "TopicSettings", "TopicTranslator"]


class TableSide(Protocol):
    """The catalog and tables side of translation (``LocalTables`` in this process,
    ``WorkerTables`` in the translation worker process)."""

    in_process: bool  # runs on the calling thread (its CPU time is the caller's)

    def where(self, settings: TopicSettings, epochs: dict[int, int]) -> Position: ...

    def write(self, settings: TopicSettings, reads: list[PartitionRead]) -> FlushResult: ...

    def maintain(self, settings: TopicSettings, now_ms: int, orphan_age_ms: int
                 ) -> Expired: ...

    def drop(self, name: str, dlq_name: str) -> None: ...

    def identifier(self, name: str) -> str: ...

    def close(self) -> None: ...


class TopicTranslator:
    def __init__(self, settings: TopicSettings, source: PartitionSource, side: TableSide, *,
                 max_bytes: int = 64 << 20) -> None:
        self.settings = settings
        self.source = source
        self.side = side
        self.max_bytes = max_bytes
        # partition -> next offset the table holds (what retention must keep from)
        self.committed: dict[int, int] = {}
        self.lso: dict[int, int] = {}
        # partition -> monotonic time the table last held everything up to the LSO read
        self.behind_since: dict[int, float] = {}
        self.snapshot_id: int | None = None  # the table's current snapshot, as last read
        self.read_once = False  # the table has been read (its offsets are in committed)
        self.flush_started = 0.0  # monotonic start of the last flush, on its thread
        self.cpu_s = 0.0  # CPU time of the flushes (this thread's and the table side's)
        self.wall_s = 0.0  # their wall time
        self.flushes = 0  # flushes that read records
        # the table's offsets as the last flush left them, and the leader epochs then
        self._have: tuple[dict[int, int], dict[int, int]] | None = None

    def floor(self, partition: int) -> Callable[[], int | None]:
        """The retention floor of one partition: nothing at or after the table's offset
        goes (and nothing at all before the table has been read once)."""
        return lambda: self.committed.get(partition, 0)

    def lag(self) -> dict[int, int]:
        """Records not yet in the table, per partition led here, as of the call: the log's
        last stable offset is read now, so the lag grows while flushes wait (the thread's
        lower priority, a long target lag) or fail, not only when one runs."""
        out = {}
        for tp in self.source.topic_partitions(self.settings.topic):
            leading = self.source.leadership(tp)
            if leading is not None:
                out[tp.partition] = max(0, leading.last_stable_offset
                                        - self.committed.get(tp.partition, 0))
        return out

    def lag_ms(self, now: float) -> dict[int, float]:
        """How long the table has been behind each partition led here (0 when current)."""
        since = self.behind_since
        return {p: 0.0 if lag == 0 or p not in since else (now - since[p]) * 1000
                for p, lag in self.lag().items()}

    def refresh(self, epochs: dict[int, int]) -> dict[int, int]:
        """Where the table is (asked of the table side); its offsets."""
        position = self.side.where(self.settings, epochs)
        self.committed.update(position.offsets)
        self.snapshot_id = position.snapshot_id
        self.read_once = True
        return position.offsets

    def flush(self) -> FlushResult:
        """One flush (translation thread). Raises when the catalog or warehouse fails (or
        the worker process died): nothing is committed then, and the next flush starts from
        the table again."""
        self.flush_started = time.monotonic()
        cpu = time.thread_time()
        result = FlushResult()
        try:
            result = self._flush()
        finally:
            own = time.thread_time() - cpu
            self.cpu_s += own if self.side.in_process else own + result.cpu_s
            self.wall_s += time.monotonic() - self.flush_started
        self.flushes += bool(result.committed)
        return result

    def _flush(self) -> FlushResult:
        epochs = self._observe()  # the lag grows even while the catalog cannot be reached
        if self._caught_up():
            return FlushResult()  # nothing to read: the catalog is not asked
        have, self._have = self._have, None  # kept only by a flush that did not fail
        offsets = have[0] if have is not None and have[1] == epochs else self.refresh(epochs)
        reads = self._read(offsets)
        if not reads:
            self._have = (offsets, epochs)
            return FlushResult()
        result = self.side.write(self.settings, reads)
        if result.raced:  # nothing committed: the next flush asks where the table is
            return result
        self.committed.update(result.committed)
        self._have = ({**offsets, **result.committed}, epochs)
        if result.committed:
            self.snapshot_id = result.snapshot_id
        now = time.monotonic()
        for p, end in result.committed.items():
            if end >= self.lso.get(p, end):
                self.behind_since[p] = now  # current as of this flush's read
        return result

    def maintain(self, now_ms: int, orphan_age_ms: int = -1) -> Expired:
        """Expire the old snapshots of the topic's table and its DLQ table, then remove
        their orphan files older than ``orphan_age_ms`` (-1: not); ``now_ms`` is wall-clock
        time."""
        return self.side.maintain(self.settings, now_ms, orphan_age_ms)

    def _caught_up(self) -> bool:
        """Whether the table, as last read or committed here, holds every partition led here
        up to its last stable offset (it cannot be further: nothing past the LSO is
        translated, by this broker or another)."""
        return self.read_once and all(self.committed.get(p) == lso
                                      for p, lso in self.lso.items())

    def _observe(self) -> dict[int, int]:
        """The last stable offset of each partition led here (what the lag is measured to);
        returns the leader epoch of each (a change: the table is read from the catalog)."""
        epochs = {}
        for tp in self.source.topic_partitions(self.settings.topic):
            leading = self.source.leadership(tp)
            if leading is None:
                self.lso.pop(tp.partition, None)
            else:
                self.lso[tp.partition] = leading.last_stable_offset
                self.behind_since.setdefault(tp.partition, time.monotonic())
                epochs[tp.partition] = leading.leader_epoch
        return epochs

    def _read(self, have: dict[int, int]) -> list[PartitionRead]:
        """The committed batches of each partition led here from where the table is, up to
        the flush's budget (split over the partitions)."""
        reads = []
        partitions = self.source.topic_partitions(self.settings.topic)
        budget = max(1 << 20, self.max_bytes // max(1, len(partitions)))
        for tp in partitions:
            leading = self.source.leadership(tp)
            if leading is None:
                self.lso.pop(tp.partition, None)
                continue
            p = tp.partition
            self.lso[p] = leading.last_stable_offset
            self.behind_since.setdefault(p, time.monotonic())
            start = have.get(p, leading.log_start_offset)
            if start < leading.log_start_offset:
                log.warning("%s: offsets [%d, %d) left the log before translation", tp, start,
                            leading.log_start_offset)
            ranges, end = self._read_partition(tp, start, leading.last_stable_offset, budget)
            if end > start or p not in have:
                reads.append(PartitionRead(p, start, end, leading.leader_epoch, p not in have,
                                           ranges=ranges))
        if self.side.in_process:  # the table side reads them here (a worker: itself)
            for r in reads:
                r.data, r.ranges = read_ranges(r.ranges), []
        return reads

    def _read_partition(self, tp: TopicPartition, start: int, lso: int, budget: int
                        ) -> tuple[list[FileRange], int]:
        """Where the committed batches of ``tp`` from ``start`` up to ``budget`` bytes are,
        and the offset they reach (at most ``lso``)."""
        position, used = start, 0
        ranges: list[FileRange] = []
        while position < lso and used < budget:
            got = self.source.read_committed(tp, position, budget - used)
            if got.next_offset <= position:
                break
            merge(ranges, got.ranges)
            used += sum(r.size for r in got.ranges)
            position = min(got.next_offset, lso)  # a batch may reach past the LSO read
        return ranges, position
