"""A topic's translator at one broker: each flush reads the committed records of the
partitions this broker leads, from where the table says each partition is, decodes them and
appends them to the topic's table in one Iceberg commit (undecodable ones to the DLQ table
first). Flushes run on the translation thread, never on the event loop: produce never waits.

Resuming is reading the table: every flush starts each partition at the next offset the
table's current snapshot records for it (the log start offset for a partition the table has
never seen), so a restart or a leadership move continues exactly there.

The table a flush starts from (and the DLQ table) is the one this translator's own last
commit left (the catalog is not asked again) while the partitions it leads and their leader
epochs are the same; any failure, a commit that lost a race, and a snapshot expiry that
committed make the next flush load it from the catalog. A table someone else committed to
in between is safe to start from: the commit's requirement on the branch's snapshot (checked
by the catalog against its current metadata) refuses it, its files are deleted, and the next
flush starts from the catalog's table."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyiceberg.exceptions import CommitFailedException, ResolveError, ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from tidelog.config.iceberg_config import DLQ_TABLE, KEY_VALUE
from tidelog.records import RecordBatch
from tidelog.util.topic_partition import TopicPartition

from .columns import dlq_schema, table_schema
from .log_source import PartitionSource
from .maintenance import Expired, expire_snapshots
from .rows import DlqRows, RecordSorter, Sorted, merge, table_rows
from .schemas import Codecs
from .tables import Fenced, Tables, table_offsets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicSettings:
    topic: str
    mode: str
    partition_spec: str
    invalid_record_action: str
    target_lag_ms: int
    dlq_suffix: str

    @property
    def dlq_name(self) -> str:
        return self.topic + self.dlq_suffix


@dataclass
class FlushResult:
    rows: int = 0
    dlq_rows: int = 0
    dropped: int = 0
    committed: dict[int, int] = field(default_factory=dict)  # partition -> next offset


@dataclass
class _Read:
    starts: dict[int, int] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)


class TopicTranslator:
    def __init__(self, settings: TopicSettings, source: PartitionSource, tables: Tables,
                 codecs: Codecs, *, max_bytes: int = 64 << 20) -> None:
        self.settings = settings
        self.source = source
        self.tables = tables
        self.sorter = RecordSorter(settings.topic, settings.mode, codecs)
        self.max_bytes = max_bytes
        # partition -> next offset the table holds (what retention must keep from)
        self.committed: dict[int, int] = {}
        self.lso: dict[int, int] = {}
        # partition -> monotonic time the table last held everything up to the LSO read
        self.behind_since: dict[int, float] = {}
        self.snapshot_id: int | None = None  # the table's current snapshot, as last read
        self.read_once = False  # the table has been read (its offsets are in committed)
        self.flush_started = 0.0  # monotonic start of the last flush, on its thread
        self.cpu_s = 0.0  # CPU time of the flushes' own thread, all flushes
        self.wall_s = 0.0  # their wall time
        self.flushes = 0  # flushes that read records
        # the table as this translator's last commit left it, and the leader epochs then
        self._last: tuple[Table, dict[int, int]] | None = None
        self._last_dlq: tuple[Table, dict[int, int]] | None = None  # the same of the DLQ table

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

    def refresh(self) -> Table | None:
        table = self.tables.load(self.settings.topic)
        if table is not None:
            snapshot = table.current_snapshot()
            self.committed.update(table_offsets(snapshot).offsets)
            self.snapshot_id = snapshot.snapshot_id if snapshot is not None else None
        self.read_once = True
        return table

    def flush(self) -> FlushResult:
        """One flush (translation thread). Raises when the catalog or warehouse fails:
        nothing is committed then, and the next flush starts from the table again."""
        self.flush_started = time.monotonic()
        cpu = time.thread_time()
        try:
            result = self._flush()
        finally:
            self.cpu_s += time.thread_time() - cpu
            self.wall_s += time.monotonic() - self.flush_started
        self.flushes += bool(result.committed)
        return result

    def _flush(self) -> FlushResult:
        epochs = self._observe()  # the lag grows even while the catalog cannot be reached
        if self._caught_up():
            return FlushResult()  # nothing to read: the catalog is not asked
        last, self._last = self._last, None  # kept only by a commit (or a flush of nothing)
        last_dlq, self._last_dlq = self._last_dlq, None
        dlq_table = last_dlq[0] if last_dlq is not None and last_dlq[1] == epochs else None
        table = last[0] if last is not None and last[1] == epochs else self.refresh()
        read, records = self._read(table)
        if not read.starts:
            self._last = (table, epochs) if table is not None else None
            self._last_dlq = (dlq_table, epochs) if dlq_table is not None else None
            return FlushResult()
        result = FlushResult(committed=dict(read.ends))
        if table is None:
            table = self.tables.create(self.settings.topic, self._schema(records),
                                       self.settings.partition_spec)
        table = self._evolve(table, records)
        data = table_rows(records, table.schema())
        dlq = DlqRows()
        if records.dlq:
            dlq.add_rows(records.raw, sorted(records.dlq), [records.dlq[i] for i in
                                                             sorted(records.dlq)])
        try:
            if len(dlq) and self.settings.invalid_record_action == DLQ_TABLE:
                dlq_table = self._commit_dlq(dlq, read, dlq_table)
                result.dlq_rows = len(dlq)
            elif len(dlq):
                result.dropped = len(dlq)
            committed = self.tables.commit(table, data, read.starts, read.ends, read.epochs)
        except (Fenced, CommitFailedException) as exc:  # a commit raced ours: start over
            log.info("%s: another commit went first (%s); resuming from the table",
                     self.settings.topic, exc)
            return FlushResult()
        self.committed.update(read.ends)
        self._last = (committed, epochs)
        self._last_dlq = (dlq_table, epochs) if dlq_table is not None else None
        snapshot = committed.current_snapshot()
        self.snapshot_id = snapshot.snapshot_id if snapshot is not None else self.snapshot_id
        now = time.monotonic()
        for p, end in read.ends.items():
            if end >= self.lso.get(p, end):
                self.behind_since[p] = now  # current as of this flush's read
        result.rows = data.num_rows
        return result

    def maintain(self, now_ms: int, orphan_age_ms: int = -1) -> Expired:
        """Expire the old snapshots of the topic's table and its DLQ table, then remove
        their orphan files older than ``orphan_age_ms`` (-1: not); ``now_ms`` is wall-clock
        time."""
        snapshots = files = orphans = 0
        for name in (self.settings.topic, self.settings.dlq_name):
            table = self.tables.load(name)
            if table is None:
                continue
            done = expire_snapshots(table, now_ms)
            snapshots, files = snapshots + done.snapshots, files + done.files
            if done.snapshots:  # the next flush reads the table expiry left (a pass that
                # expired nothing committed nothing: the table in hand is still current)
                self._last = self._last_dlq = None
            if orphan_age_ms >= 0:
                orphans += self.tables.remove_orphans(name, table, now_ms, orphan_age_ms)
        return Expired(snapshots, files, orphans)

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

    def _read(self, table: Table | None) -> tuple[_Read, Sorted]:
        read, parts = _Read(), []
        have = table_offsets(table.current_snapshot() if table is not None else None).offsets
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
            part, end = self._read_partition(tp, start, leading.last_stable_offset, budget)
            parts.append(part)
            if end > start or p not in have:
                read.starts[p], read.ends[p] = start, end
                read.epochs[p] = leading.leader_epoch
        return read, merge(parts)

    def _read_partition(self, tp: TopicPartition, start: int, lso: int, budget: int
                        ) -> tuple[Sorted, int]:
        """The committed records of ``tp`` in [start, lso) up to ``budget`` bytes, sorted by
        codec, and the next offset to read (where a schema on its way stopped them)."""
        position, used = start, 0
        batches: list[RecordBatch] = []
        while position < lso and used < budget:
            got = self.source.read_committed(tp, position, min(budget - used, 8 << 20))
            if got.next_offset <= position:
                break
            batches.extend(got.batches)
            used += sum(b.size_in_bytes for b in got.batches)
            position = min(got.next_offset, lso)  # a batch may reach past the LSO read
        part = self.sorter.sort(tp.partition, batches, start, position)
        return part, position if part.end is None else part.end

    def _schema(self, records: Sorted) -> Schema:
        if self.settings.mode == KEY_VALUE:
            return table_schema(None)
        first = next(iter(records.codecs()), None)
        return table_schema(first.fields if first is not None else [])

    def _evolve(self, table: Table, records: Sorted) -> Table:
        """Add the columns of each schema the records use; the records of a schema the table
        cannot take go to the DLQ."""
        if self.settings.mode == KEY_VALUE:
            return table
        kept = []
        refused: dict[int, str] = {}  # codec (each partition has a group of it) -> why
        taken: set[int] = set()
        for group in records.groups:
            assert group.codec is not None
            key = id(group.codec)
            if key not in taken and key not in refused:
                try:
                    table = self.tables.evolve(table, table_schema(group.codec.fields))
                    taken.add(key)
                except (ValidationError, ResolveError, ValueError) as exc:  # a type
                    # Iceberg cannot promote to (a catalog failure is not caught: the flush
                    # fails)
                    log.warning("%s: schema not taken by the table: %s", self.settings.topic,
                                exc)
                    refused[key] = f"schema not taken by the table: {exc}"
            if key in refused:
                records.dlq.update((int(i), refused[key]) for i in group.rows)
            else:
                kept.append(group)
        records.groups = kept
        return table

    def _commit_dlq(self, dlq: DlqRows, read: _Read, table: Table | None) -> Table:
        """DLQ rows first: a record the DLQ table already holds (the main commit failed after
        it) is not added twice, by the DLQ table's own offsets. ``table``: the DLQ table as
        this translator's last commit left it (None: read from the catalog); returns it as
        this commit leaves it."""
        name = self.settings.dlq_name
        if table is None:
            table = self.tables.load(name) or self.tables.create(name, dlq_schema(), "()")
        have = table_offsets(table.current_snapshot()).offsets
        keep = [i for i in range(len(dlq))
                if dlq.coords.offset[i] >= have.get(dlq.coords.partition[i], -1)]
        if len(keep) < len(dlq):
            dlq = dlq.subset(keep)
        starts = {p: have[p] for p in read.ends if p in have}
        ends = {p: max(e, have.get(p, e)) for p, e in read.ends.items()}
        return self.tables.commit(table, dlq.to_arrow(table.schema()), starts, ends,
                                  read.epochs)
