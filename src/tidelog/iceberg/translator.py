"""A topic's translator at one broker: each flush reads the committed records of the
partitions this broker leads, from where the table says each partition is, decodes them and
appends them to the topic's table in one Iceberg commit (undecodable ones to the DLQ table
first). Flushes run on the translation thread, never on the event loop: produce never waits.

Resuming is reading the table: every flush starts each partition at the next offset the
table's current snapshot records for it (the log start offset for a partition the table has
never seen), so a restart or a leadership move continues exactly there."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyiceberg.exceptions import CommitFailedException, ResolveError, ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from tidelog.config.iceberg_config import DLQ_TABLE, KEY_VALUE
from tidelog.util.topic_partition import TopicPartition

from .columns import dlq_schema, table_schema
from .log_source import PartitionSource
from .rows import DecodedRows, DlqRows, RecordDecoder, WaitForSchema, rows_to_arrow
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
        self.decoder = RecordDecoder(settings.topic, settings.mode, codecs)
        self.max_bytes = max_bytes
        # partition -> next offset the table holds (what retention must keep from)
        self.committed: dict[int, int] = {}
        self.lso: dict[int, int] = {}
        # partition -> monotonic time the table last held everything up to the LSO read
        self.behind_since: dict[int, float] = {}

    def floor(self, partition: int) -> Callable[[], int | None]:
        """The retention floor of one partition: nothing at or after the table's offset
        goes (and nothing at all before the table has been read once)."""
        return lambda: self.committed.get(partition, 0)

    def lag(self) -> dict[int, int]:
        """Records not yet in the table, per partition led here."""
        return {p: max(0, lso - self.committed.get(p, 0)) for p, lso in self.lso.items()}

    def refresh(self) -> Table | None:
        table = self.tables.load(self.settings.topic)
        if table is not None:
            self.committed.update(table_offsets(table.current_snapshot()).offsets)
        return table

    def flush(self) -> FlushResult:
        """One flush (translation thread). Raises when the catalog or warehouse fails:
        nothing is committed then, and the next flush starts from the table again."""
        self._observe()  # the lag grows even while the catalog cannot be reached
        table = self.refresh()
        read, rows, dlq = self._read(table)
        if not read.starts:
            return FlushResult()
        result = FlushResult(committed=dict(read.ends))
        if table is None:
            table = self.tables.create(self.settings.topic, self._schema(rows, dlq),
                                       self.settings.partition_spec)
        table, rows = self._evolve(table, rows, dlq)
        data = rows_to_arrow(rows, table.schema(), dlq)
        try:
            if len(dlq) and self.settings.invalid_record_action == DLQ_TABLE:
                self._commit_dlq(dlq, read)
                result.dlq_rows = len(dlq)
            elif len(dlq):
                result.dropped = len(dlq)
            self.tables.commit(table, data, read.starts, read.ends, read.epochs)
        except (Fenced, CommitFailedException) as exc:  # a commit raced ours: start over
            log.info("%s: another commit went first (%s); resuming from the table",
                     self.settings.topic, exc)
            return FlushResult()
        self.committed.update(read.ends)
        now = time.monotonic()
        for p, end in read.ends.items():
            if end >= self.lso.get(p, end):
                self.behind_since[p] = now  # current as of this flush's read
        result.rows = data.num_rows
        return result

    def _observe(self) -> None:
        """The last stable offset of each partition led here (what the lag is measured to)."""
        for tp in self.source.topic_partitions(self.settings.topic):
            leading = self.source.leadership(tp)
            if leading is None:
                self.lso.pop(tp.partition, None)
            else:
                self.lso[tp.partition] = leading.last_stable_offset
                self.behind_since.setdefault(tp.partition, time.monotonic())

    def _read(self, table: Table | None) -> tuple[_Read, DecodedRows, DlqRows]:
        read, rows, dlq = _Read(), DecodedRows(), DlqRows()
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
            end = self._read_partition(tp, start, leading.last_stable_offset, budget, rows, dlq)
            if end > start or p not in have:
                read.starts[p], read.ends[p] = start, end
                read.epochs[p] = leading.leader_epoch
        return read, rows, dlq

    def _read_partition(self, tp: TopicPartition, start: int, lso: int, budget: int,
                        rows: DecodedRows, dlq: DlqRows) -> int:
        """Decode committed records of ``tp`` in [start, lso) up to ``budget`` bytes; returns
        the next offset to read."""
        position, used = start, 0
        while position < lso and used < budget:
            got = self.source.read_committed(tp, position, min(budget - used, 8 << 20))
            if got.next_offset <= position:
                break
            for batch in got.batches:
                used += batch.size_in_bytes
                for record in batch.iter_records():
                    if start <= record.offset < lso:
                        try:
                            self.decoder.decode(tp.partition, record, rows, dlq)
                        except WaitForSchema:
                            return record.offset  # the rest of the partition waits
            position = min(got.next_offset, lso)  # a batch may reach past the LSO read
        return position

    def _schema(self, rows: DecodedRows, dlq: DlqRows) -> Schema:
        if self.settings.mode == KEY_VALUE:
            return table_schema(None)
        first = next((c for c in rows.codecs if c is not None), None)
        return table_schema(first.fields if first is not None else [])

    def _evolve(self, table: Table, rows: DecodedRows, dlq: DlqRows
                ) -> tuple[Table, DecodedRows]:
        """Add the columns of each schema the rows use; rows of a schema the table cannot
        take go to the DLQ."""
        if self.settings.mode == KEY_VALUE:
            return table, rows
        seen: dict[int, ValueCodec] = {}
        for c in rows.codecs:
            if c is not None and id(c) not in seen:
                seen[id(c)] = c
        refused: set[int] = set()
        for key, codec in seen.items():
            try:
                table = self.tables.evolve(table, table_schema(codec.fields))
            except (ValidationError, ResolveError, ValueError) as exc:  # a type Iceberg
                # cannot promote to (a catalog failure is not caught: the flush fails)
                log.warning("%s: schema not taken by the table: %s", self.settings.topic, exc)
                refused.add(key)
                reason = f"schema not taken by the table: {exc}"
                for i, c in enumerate(rows.codecs):
                    if id(c) == key:
                        from tidelog.records import Record

                        co = rows.coords
                        dlq.add(co.partition[i], Record(co.offset[i], co.timestamp[i],
                                                        co.key[i], rows.raw[i], co.headers[i]),
                                reason)
        if not refused:
            return table, rows
        drop = {i for i, c in enumerate(rows.codecs) if id(c) in refused}
        return table, rows.without(drop)

    def _commit_dlq(self, dlq: DlqRows, read: _Read) -> None:
        """DLQ rows first: a record the DLQ table already holds (the main commit failed after
        it) is not added twice, by the DLQ table's own offsets."""
        name = self.settings.dlq_name
        table = self.tables.load(name) or self.tables.create(name, dlq_schema(), "()")
        have = table_offsets(table.current_snapshot()).offsets
        keep = [i for i in range(len(dlq))
                if dlq.coords.offset[i] >= have.get(dlq.coords.partition[i], -1)]
        if len(keep) < len(dlq):
            dlq = _subset_dlq(dlq, keep)
        starts = {p: have[p] for p in read.ends if p in have}
        ends = {p: max(e, have.get(p, e)) for p, e in read.ends.items()}
        self.tables.commit(table, dlq.to_arrow(table.schema()), starts, ends, read.epochs)


def _subset_dlq(dlq: DlqRows, keep: list[int]) -> DlqRows:
    from tidelog.records import Record

    out = DlqRows()
    c = dlq.coords
    for i in keep:
        out.add(c.partition[i], Record(c.offset[i], c.timestamp[i], c.key[i], dlq.values[i],
                                       c.headers[i]), dlq.reasons[i])
    return out
