"""One flush's records sorted for the table, column by column: the records of each
partition (record_columns: one bulk decode of its batches) are split by the codec that
decodes their values (the schema id after the magic byte, read for all values at once, or
the subject's latest schema), and the ones that cannot be decoded go to the DLQ rows with
their reason. The values of each codec are then decoded in one call (``decode_column``)
and the table's Arrow rows built from the groups."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema

from tidelog._native import core
from tidelog.config.iceberg_config import KEY_VALUE, VALUE_SCHEMA_LATEST
from tidelog.records import Record, RecordBatch
from tidelog.records.builder import RecordBatchBuilder

from .columns import KAFKA, VALUE, Coordinates, arrow_schema
from .record_columns import (
    OFFSET,
    empty_raw,
    kafka_struct,
    raw_columns,
    records_of,
    strip_prefix,
)
from .record_columns import VALUE as RAW_VALUE
from .schemas import MAGIC, Codecs, SchemaNotYetKnown, UndecodableRecord
from .value_codec import ValueCodec

TOMBSTONE = "null value (a tombstone) has no columns"
NOT_FRAMED = ("value is not in Confluent's wire format (magic byte 0 and a 4-byte schema "
              "id)")


@dataclass
class Group:
    """Rows whose values one codec decodes (None: key_value mode, the value as it is)."""

    codec: ValueCodec | None
    rows: np.ndarray  # int64 row numbers in the flush's raw records
    payloads: pa.Array  # their values
    skip: int = 0  # framing bytes before each payload, dropped by the codec's decode


@dataclass
class DlqRows:
    coords: Coordinates = field(default_factory=Coordinates)
    values: list[bytes | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, partition: int, r: Record, reason: str) -> None:
        self.coords.add(partition, r.offset, r.timestamp, r.headers, r.key)
        self.values.append(r.value)
        self.reasons.append(reason)

    def add_rows(self, raw: pa.Table, rows: Iterable[int], reasons: Iterable[str]) -> None:
        rows = list(rows)
        for (p, record), reason in zip(records_of(raw, rows), reasons, strict=True):
            self.add(p, record, reason)

    def __len__(self) -> int:
        return len(self.values)

    def subset(self, keep: list[int]) -> DlqRows:
        out = DlqRows()
        c = self.coords
        for i in keep:
            out.add(c.partition[i], Record(c.offset[i], c.timestamp[i], c.key[i],
                                           self.values[i], c.headers[i]), self.reasons[i])
        return out

    def to_arrow(self, schema: Schema) -> pa.Table:
        target = arrow_schema(schema)
        kafka = self.coords.to_arrow(target.field(KAFKA).type)
        return pa.Table.from_arrays(
            [kafka, pa.array(self.values, target.field(VALUE).type),
             pa.array(self.reasons, target.field("reason").type)],
            schema=target)


@dataclass
class Sorted:
    """A flush's records: the raw columns, the groups to decode, the rows for the DLQ."""

    raw: pa.Table = field(default_factory=empty_raw)
    groups: list[Group] = field(default_factory=list)
    dlq: dict[int, str] = field(default_factory=dict)  # row -> reason
    end: int | None = None  # the partition stops at this offset (a schema on its way)

    def __len__(self) -> int:
        return int(self.raw.num_rows)

    def codecs(self) -> list[ValueCodec]:
        return [g.codec for g in self.groups if g.codec is not None]


class RecordSorter:
    """Sorts a partition's records by codec for a topic's mode."""

    def __init__(self, topic: str, mode: str, codecs: Codecs, *,
                 schema_wait_s: float = 30.0) -> None:
        self.mode = mode
        self.codecs = codecs
        self.subject = f"{topic}-value"
        self.schema_wait_s = schema_wait_s
        self._waiting: dict[tuple[int, int], float] = {}  # (partition, offset) -> since

    def sort(self, partition: int, batches: Sequence[RecordBatch | memoryview], start: int,
             end: int) -> Sorted:
        raw = raw_columns(batches, partition, start, end)
        values = one_array(raw.column(RAW_VALUE))
        everything = np.arange(len(values), dtype=np.int64)
        if self.mode == KEY_VALUE:
            return Sorted(raw, [Group(None, everything, values)])
        out = Sorted(raw)
        present = (np.ones(len(values), dtype=bool) if not values.null_count else
                   ~np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool))
        out.dlq.update((int(i), TOMBSTONE) for i in np.flatnonzero(~present))
        if self.mode == VALUE_SCHEMA_LATEST:
            self._latest(out, everything[present], values)
        else:
            self._by_schema_id(partition, out, values, present)
        return out

    def _latest(self, out: Sorted, rows: np.ndarray, values: pa.Array) -> None:
        if not len(rows):
            return
        try:
            _, codec = self.codecs.latest(self.subject)
        except UndecodableRecord as exc:
            out.dlq.update((int(i), str(exc)) for i in rows)
            return
        out.groups.append(Group(codec, rows, _take_values(values, rows)))

    def _by_schema_id(self, partition: int, out: Sorted, values: pa.Array,
                      present: np.ndarray) -> None:
        ids, framed, distinct = _schema_ids(values, present)
        unframed = present & ~framed
        if unframed.any():
            out.dlq.update((int(i), NOT_FRAMED) for i in np.flatnonzero(unframed))
        cut = len(values)
        offsets = out.raw.column(OFFSET).to_numpy()
        for schema_id, rows in _by_id(ids, framed, distinct):
            at = int(rows[0])
            try:
                codec = self.codecs.plain(schema_id)
            except SchemaNotYetKnown as exc:
                if self._still_waiting(partition, int(offsets[at])):
                    cut = min(cut, at)
                else:
                    out.dlq.update((int(i), str(exc)) for i in rows)
                continue
            except UndecodableRecord as exc:
                out.dlq.update((int(i), str(exc)) for i in rows)
                continue
            if codec is None:  # Protobuf: each value carries its message indexes
                self._protobuf(out, schema_id, rows, values)
            else:
                out.groups.append(Group(codec, rows, _take_values(values, rows), 5))
        if cut < len(values):
            _cut(out, cut, int(offsets[cut]))

    def _protobuf(self, out: Sorted, schema_id: int, rows: np.ndarray,
                  values: pa.Array) -> None:
        """Values whose message indexes are the single byte 0 (the file's first message,
        as serializers write nearly always) as one group, read for all at once; the others
        split value by value."""
        taken = _take_values(values, rows).cast(pa.binary())
        first = first_message(taken)
        if first.any():
            try:
                codec = self.codecs.message(schema_id)
            except UndecodableRecord as exc:
                out.dlq.update((int(i), str(exc)) for i in rows[first])
            else:
                chosen = taken if first.all() else taken.filter(pa.array(first))
                out.groups.append(Group(codec, rows[first], strip_prefix(chosen, 6)))
        if not first.all():
            self._one_by_one(out, rows[~first], values)

    def _one_by_one(self, out: Sorted, rows: np.ndarray, values: pa.Array) -> None:
        by_codec: dict[int, tuple[ValueCodec, list[int], list[bytes]]] = {}
        for i, value in zip(rows.tolist(), values.take(pa.array(rows)).to_pylist(),
                            strict=True):
            try:
                _, codec, payload = self.codecs.split(value)
            except UndecodableRecord as exc:
                out.dlq[i] = str(exc)
                continue
            got = by_codec.setdefault(id(codec), (codec, [], []))
            got[1].append(i)
            got[2].append(payload)
        for codec, idx, payloads in by_codec.values():
            out.groups.append(Group(codec, np.array(idx, np.int64), pa.array(payloads,
                                                                             pa.binary())))

    def _still_waiting(self, partition: int, offset: int) -> bool:
        """A schema id the cluster's registry may not have read yet: the partition waits at
        the record for ``schema_wait_s``, then its records go to the DLQ."""
        now = time.monotonic()
        since = self._waiting.setdefault((partition, offset), now)
        if now - since < self.schema_wait_s:
            return True
        del self._waiting[(partition, offset)]
        return False


def schema_ids(values: pa.Array, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(schema id, framed) of every value: framed ones start with the magic byte and have
    the 4 bytes of an id (the native core's ``schema_ids`` twin)."""
    values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1]
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)
    framed = present & (np.diff(offsets) >= 5)
    at = offsets[:-1][framed]
    ok = np.zeros(n, dtype=bool)
    ok[framed] = data[at] == MAGIC
    ids = np.zeros(n, dtype=np.int64)
    got = data[at + 1].astype(np.int64) << 24  # the big-endian id, a byte at a time
    got |= data[at + 2].astype(np.int64) << 16
    got |= data[at + 3].astype(np.int64) << 8
    got |= data[at + 4]
    ids[framed] = got
    return ids, ok


def _schema_ids(values: pa.Array, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``schema_ids`` and how many distinct ids the framed values carry (2: more than
    one), in one native pass when the core is built."""
    if core is None:
        ids, framed = schema_ids(values, present)
        got = ids[framed]
        return ids, framed, 0 if not len(got) else 1 if bool((got == got[0]).all()) else 2
    values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1]
    got, ok, distinct = core.schema_ids(values.buffers()[2] or b"", offsets,
                                        np.ascontiguousarray(present, dtype=bool))
    return np.frombuffer(got, np.int64), np.frombuffer(ok, bool), int(distinct)


def _by_id(ids: np.ndarray, framed: np.ndarray, distinct: int
           ) -> list[tuple[int, np.ndarray]]:
    """(schema id, its rows) for each id of the framed values, by first row: one group
    without a compare when they all carry one id."""
    if not distinct:
        return []
    framed_rows = np.flatnonzero(framed)
    if distinct == 1:
        return [(int(ids[framed_rows[0]]), framed_rows)]
    unique, first = np.unique(ids[framed_rows], return_index=True)
    return [(int(i), framed_rows[ids[framed_rows] == i]) for i, _ in sorted(
        zip(unique.tolist(), first.tolist(), strict=True), key=lambda x: x[1])]


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its chunk when it has one (``combine_chunks`` copies even
    a single chunk's data)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def first_message(values: pa.BinaryArray) -> np.ndarray:
    """Which framed Protobuf values have the message indexes [] (one byte 0 after the
    schema id) and so a payload from byte 6 on."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1].astype(np.int64)
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)
    long_enough = np.diff(offsets) >= 6
    out = np.zeros(n, dtype=bool)
    out[long_enough] = data[offsets[:-1][long_enough] + 5] == 0
    return out


def _take_values(values: pa.Array, rows: np.ndarray) -> pa.Array:
    """The values of ``rows`` (distinct, ascending: every row when there are as many)."""
    if len(rows) == len(values):
        return values
    return values.take(pa.array(rows))


def _cut(out: Sorted, cut: int, offset: int) -> None:
    """Keep the rows before ``cut`` only: the partition waits at ``offset``."""
    out.raw = out.raw.slice(0, cut)
    out.end = offset
    out.dlq = {i: r for i, r in out.dlq.items() if i < cut}
    kept = []
    for g in out.groups:
        mask = g.rows < cut
        if mask.any():
            kept.append(Group(g.codec, g.rows[mask], g.payloads.filter(pa.array(mask)),
                              g.skip))
    out.groups = kept


def merge(parts: list[Sorted]) -> Sorted:
    """The partitions' records as one flush. Each partition's groups stay its own (rows
    renumbered): joining the groups of one codec would copy every value once more, for
    one decode call instead of one a partition."""
    out = Sorted(pa.concat_tables([p.raw for p in parts]) if parts else empty_raw())
    base = 0
    for p in parts:
        out.groups.extend(Group(g.codec, g.rows + base, g.payloads, g.skip)
                          for g in p.groups)
        out.dlq.update((i + base, r) for i, r in p.dlq.items())
        base += p.raw.num_rows
    return out


def table_rows(s: Sorted, schema: Schema) -> pa.Table:
    """The decoded rows as an Arrow table of ``schema``'s columns, in the records' order;
    values that do not decode (or fit) join ``s.dlq``."""
    target = arrow_schema(schema)
    value_fields = [f for f in target if f.name != KAFKA]
    value_type = pa.struct(value_fields)
    kafka_type = target.field(KAFKA).type
    pieces, order = [], []
    for g in s.groups:
        bad: dict[int, str] = {}
        if g.codec is None:
            values = pa.StructArray.from_arrays([g.payloads], names=[VALUE])
        else:
            values, bad = g.codec.decode_column(g.payloads, value_type, g.skip)
        s.dlq.update((int(g.rows[i]), reason) for i, reason in bad.items())
        rows = g.rows
        if bad:
            keep = np.ones(len(rows), dtype=bool)
            keep[list(bad)] = False
            rows, values = rows[keep], values.filter(pa.array(keep))
        kafka = kafka_struct(_take(s.raw, rows), kafka_type)
        cols = values.cast(value_type).flatten() if value_fields else []
        pieces.append(pa.Table.from_arrays([kafka, *cols], schema=target))
        order.append(rows)
    if not pieces:
        return target.empty_table()
    table = pa.concat_tables(pieces)
    if in_order(order):  # one group a partition, the partitions in turn: nearly always
        return table
    return _take(table, np.argsort(np.concatenate(order), kind="stable"))


def in_order(order: list[np.ndarray]) -> bool:
    """Whether groups of ascending rows, one after the other, are ascending as a whole:
    each group's first row past the last row of the groups before it."""
    last = -1
    for rows in order:
        if len(rows):
            if int(rows[0]) <= last:
                return False
            last = int(rows[-1])
    return True


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)``; a slice (no copy) when ``rows`` are a run of consecutive
    rows, the table itself when they are all of them in order."""
    if not len(rows):
        return table.slice(0, 0)
    if int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool((np.diff(rows) == 1).all()):
        return table if len(rows) == table.num_rows else table.slice(int(rows[0]), len(rows))
    return table.take(pa.array(rows))


def batch_of(records: list[Record]) -> list[RecordBatch]:
    """Records as one v2 batch (tests, and rows made by hand)."""
    if not records:
        return []
    b = RecordBatchBuilder(base_offset=records[0].offset)
    for r in records:
        b.append(r.timestamp, r.key, r.value, r.headers, offset=r.offset)
    return [RecordBatch(b.build())]
