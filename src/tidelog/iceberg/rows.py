"""One flush's records as rows: the kafka coordinates and value columns of the records that
decode, and the DLQ rows (raw key, value, coordinates and reason) of those that do not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.schema import Schema

from tidelog.config.iceberg_config import KEY_VALUE, VALUE_SCHEMA_LATEST
from tidelog.records import Record

from .columns import KAFKA, VALUE, Coordinates, arrow_schema
from .schemas import Codecs, SchemaNotYetKnown, UndecodableRecord
from .value_codec import ValueCodec


@dataclass
class DecodedRows:
    coords: Coordinates = field(default_factory=Coordinates)
    values: list[Mapping[str, object]] = field(default_factory=list)
    codecs: list[ValueCodec | None] = field(default_factory=list)  # per row; None: key_value
    raw: list[bytes | None] = field(default_factory=list)  # the values as produced

    def add(self, partition: int, r: Record, codec: ValueCodec | None,
            value: Mapping[str, object]) -> None:
        self.coords.add(partition, r.offset, r.timestamp, r.headers, r.key)
        self.values.append(value)
        self.codecs.append(codec)
        self.raw.append(r.value)

    def without(self, drop: set[int]) -> DecodedRows:
        out = DecodedRows()
        c = self.coords
        for i in range(len(self.values)):
            if i not in drop:
                out.coords.add(c.partition[i], c.offset[i], c.timestamp[i], c.headers[i],
                               c.key[i])
                out.values.append(self.values[i])
                out.codecs.append(self.codecs[i])
                out.raw.append(self.raw[i])
        return out

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class DlqRows:
    coords: Coordinates = field(default_factory=Coordinates)
    values: list[bytes | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, partition: int, r: Record, reason: str) -> None:
        self.coords.add(partition, r.offset, r.timestamp, r.headers, r.key)
        self.values.append(r.value)
        self.reasons.append(reason)

    def __len__(self) -> int:
        return len(self.values)

    def to_arrow(self, schema: Schema) -> pa.Table:
        target = arrow_schema(schema)
        kafka = self.coords.to_arrow(target.field(KAFKA).type)
        return pa.Table.from_arrays(
            [kafka, pa.array(self.values, target.field(VALUE).type),
             pa.array(self.reasons, target.field("reason").type)],
            schema=target)


class WaitForSchema(Exception):
    """Stop the partition at this record for now: its schema may still be on its way."""


class RecordDecoder:
    """Turns records into rows for a topic's mode."""

    def __init__(self, topic: str, mode: str, codecs: Codecs, *,
                 schema_wait_s: float = 30.0) -> None:
        self.mode = mode
        self.codecs = codecs
        self.subject = f"{topic}-value"
        self.schema_wait_s = schema_wait_s
        self._waiting: dict[tuple[int, int], float] = {}  # (partition, offset) -> since

    def decode(self, partition: int, r: Record, rows: DecodedRows, dlq: DlqRows) -> None:
        if self.mode == KEY_VALUE:
            rows.add(partition, r, None, {VALUE: r.value})
            return
        try:
            if r.value is None:
                raise UndecodableRecord("null value (a tombstone) has no columns")
            value = bytes(r.value)
            if self.mode == VALUE_SCHEMA_LATEST:
                _, codec = self.codecs.latest(self.subject)
                payload = value
            else:
                _, codec, payload = self.codecs.split(value)
            try:
                row = codec.decode(payload)
            except Exception as exc:
                raise UndecodableRecord(f"value does not parse: {exc}") from None
        except SchemaNotYetKnown as exc:
            self._wait_or_give_up(partition, r, dlq, str(exc))
            return
        except UndecodableRecord as exc:
            dlq.add(partition, r, str(exc))
            return
        rows.add(partition, r, codec, row)

    def _wait_or_give_up(self, partition: int, r: Record, dlq: DlqRows, reason: str) -> None:
        """A schema id the cluster's registry may not have read yet: the partition waits at
        the record (WaitForSchema) for ``schema_wait_s``, then the record goes to the DLQ."""
        import time

        now = time.monotonic()
        since = self._waiting.setdefault((partition, r.offset), now)
        if now - since < self.schema_wait_s:
            raise WaitForSchema(reason)
        del self._waiting[(partition, r.offset)]
        dlq.add(partition, r, reason)


def rows_to_arrow(rows: DecodedRows, schema: Schema, dlq: DlqRows,
                  keep: list[bool] | None = None) -> pa.Table:
    """The rows as an Arrow table of ``schema``'s columns (columns a row's schema lacks are
    null). A row pyarrow refuses (a value out of its column's range) goes to ``dlq``."""
    target = arrow_schema(schema)
    value_fields = [f for f in target if f.name != KAFKA]
    value_type = pa.struct(value_fields)
    try:
        values = pa.array(rows.values, value_type)
        index = None
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        index = _rows_that_convert(rows, value_type, dlq)
        values = pa.array([rows.values[i] for i in index], value_type)
    coords = rows.coords if index is None else _subset(rows.coords, index)
    kafka = coords.to_arrow(target.field(KAFKA).type)
    columns = [kafka, *values.flatten()] if value_fields else [kafka]
    return pa.Table.from_arrays(columns, schema=target)


def _rows_that_convert(rows: DecodedRows, value_type: pa.StructType, dlq: DlqRows) -> list[int]:
    good = []
    c = rows.coords
    for i, v in enumerate(rows.values):
        try:
            pa.array([v], value_type)
            good.append(i)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                OverflowError) as exc:
            record = Record(c.offset[i], c.timestamp[i], c.key[i], rows.raw[i], c.headers[i])
            dlq.add(c.partition[i], record, f"value does not fit the table's columns: {exc}")
    return good


def _subset(c: Coordinates, index: list[int]) -> Coordinates:
    out = Coordinates()
    for i in index:
        out.add(c.partition[i], c.offset[i], c.timestamp[i], c.headers[i], c.key[i])
    return out
