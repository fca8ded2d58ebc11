"""The table side of a flush: given the committed batches of the partitions a broker leads
(as bytes, from where the table said each partition was), sort and decode them, evolve the
table, commit the undecodable records to the DLQ table and the rest to the topic's table in
one Iceberg commit each. Everything here holds the catalog and the tables and nothing of the
log: it runs on the broker's translation thread, or in the translation worker process
(``worker``) with the same code.

The table a flush starts from (and the DLQ table) is the one this writer's own last commit
(or the last ``where``) left, while the leader epochs the flush names are the same; any
failure, a commit that lost a race, and a snapshot expiry that committed make the next flush
load it from the catalog. A table someone else committed to in between is safe to start from:
the commit's requirement on the branch's snapshot (checked by the catalog against its current
metadata) refuses it, its files are deleted, and the next flush starts from the catalog's
table."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from pyiceberg.exceptions import CommitFailedException, ResolveError, ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from tidelog.config.iceberg_config import DLQ_TABLE, KEY_VALUE
from tidelog.records.batch import batch_views

from .columns import dlq_schema, table_schema
from .file_ranges import FileRange
from .maintenance import Expired, expire_snapshots
from .rows import DlqRows, RecordSorter, Sorted, merge, table_rows
from .schemas import Codecs
from .tables import Fenced, Tables, table_offsets
from .value_codec import ValueCodec

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
    snapshot_id: int | None = None  # the table's snapshot after the commit
    raced: bool = False  # another commit went first: nothing committed, start from the table
    cpu_s: float = 0.0  # CPU time of the table side (its thread, or the worker's)


@dataclass(frozen=True)
class Position:
    """Where the table is: the next offset of each partition it holds, its snapshot."""

    offsets: dict[int, int]
    snapshot_id: int | None


@dataclass
class PartitionRead:
    """The committed batches of one partition in [start, end), as bytes (consecutive v2
    batches, aborted and control ones left out)."""

    partition: int
    start: int
    end: int
    epoch: int  # the leader epoch they were read in
    new: bool  # the table holds nothing of the partition yet (committed even if empty)
    data: bytes | bytearray = b""  # the batches (read from ``ranges`` by the table side)
    ranges: list[FileRange] = field(default_factory=list)  # where they are in the log


@dataclass
class _Committing:
    starts: dict[int, int] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)


class TableWriter:
    """One topic's table side (its table and DLQ table, the sorter of its records)."""

    def __init__(self, settings: TopicSettings, tables: Tables, codecs: Codecs) -> None:
        self.settings = settings
        self.tables = tables
        self.sorter = RecordSorter(settings.topic, settings.mode, codecs)
        # the table as this writer's last commit (or where) left it, and the leader epochs
        self._last: tuple[Table, dict[int, int]] | None = None
        self._last_dlq: tuple[Table, dict[int, int]] | None = None  # the same of the DLQ
        # codec -> the table schema (table uuid, schema id) found to hold its columns
        self._covered: dict[int, tuple[ValueCodec, tuple[str, int]]] = {}

    def where(self, epochs: dict[int, int]) -> Position:
        """The table's offsets: as last committed here while ``epochs`` hold, else read from
        the catalog."""
        last = self._last
        table = last[0] if last is not None and last[1] == epochs else (
            self.tables.load(self.settings.topic))
        self._last = (table, epochs) if table is not None else None
        snapshot = table.current_snapshot() if table is not None else None
        return Position(table_offsets(snapshot).offsets,
                        snapshot.snapshot_id if snapshot is not None else None)

    def write(self, reads: list[PartitionRead]) -> FlushResult:
        """Commit ``reads`` (their starts must be where the table is, else nothing goes in:
        ``raced``). Raises when the catalog or warehouse fails: nothing is committed then,
        and the next write starts from the catalog's table."""
        cpu = time.thread_time()
        try:
            result = self._write(reads)
        finally:
            cpu = time.thread_time() - cpu
        result.cpu_s = cpu
        return result

    def _write(self, reads: list[PartitionRead]) -> FlushResult:
        epochs = {r.partition: r.epoch for r in reads}
        last, self._last = self._last, None  # kept only by a commit
        last_dlq, self._last_dlq = self._last_dlq, None
        dlq_table = last_dlq[0] if last_dlq is not None and last_dlq[1] == epochs else None
        table = last[0] if last is not None and last[1] == epochs else (
            self.tables.load(self.settings.topic))
        committing, records = self._sort(reads)
        if not committing.starts:
            self._last = (table, epochs) if table is not None else None
            self._last_dlq = (dlq_table, epochs) if dlq_table is not None else None
            return FlushResult()
        result = FlushResult(committed=dict(committing.ends))
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
                dlq_table = self._commit_dlq(dlq, committing, dlq_table)
                result.dlq_rows = len(dlq)
            elif len(dlq):
                result.dropped = len(dlq)
            committed = self.tables.commit(table, data, committing.starts, committing.ends,
                                           committing.epochs)
        except (Fenced, CommitFailedException) as exc:  # a commit raced ours: start over
            log.info("%s: another commit went first (%s); resuming from the table",
                     self.settings.topic, exc)
            return FlushResult(raced=True)
        self._last = (committed, epochs)
        self._last_dlq = (dlq_table, epochs) if dlq_table is not None else None
        snapshot = committed.current_snapshot()
        result.snapshot_id = snapshot.snapshot_id if snapshot is not None else None
        result.rows = data.num_rows
        return result

    def _sort(self, reads: list[PartitionRead]) -> tuple[_Committing, Sorted]:
        """The records of each read sorted by codec; a partition stops where a schema on
        its way stopped its records."""
        committing, parts = _Committing(), []
        for r in reads:
            batches = batch_views(r.data)
            part = self.sorter.sort(r.partition, batches, r.start, r.end)
            parts.append(part)
            end = r.end if part.end is None else part.end
            if end > r.start or r.new:
                committing.starts[r.partition], committing.ends[r.partition] = r.start, end
                committing.epochs[r.partition] = r.epoch
        return committing, merge(parts)

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
                    table = self._take(table, group.codec)
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

    def _take(self, table: Table, codec: ValueCodec) -> Table:
        """The table evolved to hold every column of ``codec``'s schema (raises when it
        cannot); a table schema that held them before is not compared again."""
        schema_key = (str(table.metadata.table_uuid), table.metadata.current_schema_id)
        found = self._covered.get(id(codec))
        if found is not None and found[0] is codec and found[1] == schema_key:
            return table
        table = self.tables.evolve(table, table_schema(codec.fields))
        if len(self._covered) >= 256:
            self._covered.clear()
        self._covered[id(codec)] = (codec, (str(table.metadata.table_uuid),
                                            table.metadata.current_schema_id))
        return table

    def _commit_dlq(self, dlq: DlqRows, committing: _Committing, table: Table | None
                    ) -> Table:
        """DLQ rows first: a record the DLQ table already holds (the main commit failed after
        it) is not added twice, by the DLQ table's own offsets. ``table``: the DLQ table as
        this writer's last commit left it (None: read from the catalog); returns it as this
        commit leaves it."""
        name = self.settings.dlq_name
        if table is None:
            table = self.tables.load(name) or self.tables.create(name, dlq_schema(), "()")
        have = table_offsets(table.current_snapshot()).offsets
        keep = [i for i in range(len(dlq))
                if dlq.coords.offset[i] >= have.get(dlq.coords.partition[i], -1)]
        if len(keep) < len(dlq):
            dlq = dlq.subset(keep)
        ends = committing.ends
        starts = {p: have[p] for p in ends if p in have}
        return self.tables.commit(table, dlq.to_arrow(table.schema()), starts,
                                  {p: max(e, have.get(p, e)) for p, e in ends.items()},
                                  committing.epochs)


class LocalTables:
    """The table side in this process: a writer per topic over one catalog's tables. The
    translation worker serves the same calls from the broker (``worker``)."""

    in_process = True

    def __init__(self, tables: Tables, codecs: Codecs) -> None:
        self.tables = tables
        self.codecs = codecs
        self._writers: dict[str, TableWriter] = {}

    def writer(self, settings: TopicSettings) -> TableWriter:
        """The topic's writer (a new one when its settings changed)."""
        found = self._writers.get(settings.topic)
        if found is None or found.settings != settings:
            found = self._writers[settings.topic] = TableWriter(settings, self.tables,
                                                                 self.codecs)
        return found

    def where(self, settings: TopicSettings, epochs: dict[int, int]) -> Position:
        return self.writer(settings).where(epochs)

    def write(self, settings: TopicSettings, reads: list[PartitionRead]) -> FlushResult:
        return self.writer(settings).write(reads)

    def maintain(self, settings: TopicSettings, now_ms: int, orphan_age_ms: int) -> Expired:
        self.tables.clean_pending()  # files of commits whose outcome was unknown first
        return self.writer(settings).maintain(now_ms, orphan_age_ms)

    def drop(self, name: str, dlq_name: str) -> None:
        self._writers.pop(name, None)
        self.tables.drop(name)
        self.tables.drop(dlq_name)

    def identifier(self, name: str) -> str:
        return self.tables.identifier(name)

    def close(self) -> None:
        """Nothing to stop in this process."""
