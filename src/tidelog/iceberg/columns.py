"""The columns every topic table has: the ``kafka`` struct (Redpanda's ``redpanda`` struct:
partition, offset, timestamp, headers, key), then the value's own columns — or a ``value``
binary column in key_value mode. The DLQ table's layout lives here too.

Every column is optional: a newer schema version's columns are added as optional ones by
``union_by_name`` and never rewrite the table."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

KAFKA = "kafka"
VALUE = "value"


class FieldIds:
    """Fresh field ids (the catalog assigns its own on create and on union_by_name; these
    only make the Schema well-formed)."""

    def __init__(self, start: int = 1) -> None:
        self._next: Iterator[int] = itertools.count(start)

    def __call__(self) -> int:
        return next(self._next)

    def field(self, name: str, type_: IcebergType, doc: str | None = None) -> NestedField:
        return NestedField(self(), name, type_, required=False, doc=doc)


def kafka_struct(ids: FieldIds) -> NestedField:
    header = StructType(ids.field("key", StringType()), ids.field("value", BinaryType()))
    return ids.field(KAFKA, StructType(
        ids.field("partition", IntegerType()),
        ids.field("offset", LongType()),
        ids.field("timestamp", TimestamptzType()),
        ids.field("headers", ListType(ids(), header, element_required=False)),
        ids.field("key", BinaryType()),
    ), "The record's Kafka coordinates")


def table_schema(value_fields: Sequence[NestedField] | None) -> Schema:
    """kafka struct + value columns (``None``: key_value mode's ``value`` binary column)."""
    ids = FieldIds()
    fields = [kafka_struct(ids)]
    if value_fields is None:
        fields.append(ids.field(VALUE, BinaryType()))
    else:
        fields.extend(_renumber(f, ids) for f in value_fields)
    return Schema(*fields)


def dlq_schema() -> Schema:
    ids = FieldIds()
    return Schema(kafka_struct(ids), ids.field(VALUE, BinaryType()),
                  ids.field("reason", StringType()))


def _renumber(f: NestedField, ids: FieldIds) -> NestedField:
    """A copy of a value field with ids from ``ids`` (value fields come from a converter with
    its own counter)."""
    return NestedField(ids(), f.name, _renumber_type(f.field_type, ids), required=False,
                       doc=f.doc)


def _renumber_type(t: IcebergType, ids: FieldIds) -> IcebergType:
    from pyiceberg.types import MapType

    if isinstance(t, StructType):
        return StructType(*(_renumber(f, ids) for f in t.fields))
    if isinstance(t, ListType):
        return ListType(ids(), _renumber_type(t.element_type, ids), element_required=False)
    if isinstance(t, MapType):
        return MapType(ids(), t.key_type, ids(), _renumber_type(t.value_type, ids),
                       value_required=False)
    return t


def arrow_schema(schema: Schema) -> pa.Schema:
    return schema_to_pyarrow(schema, include_field_ids=False)


@dataclass
class Coordinates:
    """The kafka struct's columns of the rows of one flush, gathered column by column."""

    partition: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    timestamp: list[int] = field(default_factory=list)  # ms
    headers: list[list[tuple[str, bytes | None]]] = field(default_factory=list)
    key: list[bytes | None] = field(default_factory=list)

    def add(self, partition: int, offset: int, timestamp: int,
            headers: list[tuple[str, bytes | None]], key: bytes | None) -> None:
        self.partition.append(partition)
        self.offset.append(offset)
        self.timestamp.append(timestamp)
        self.headers.append(headers)
        self.key.append(key)

    def __len__(self) -> int:
        return len(self.offset)

    def to_arrow(self, type_: pa.StructType) -> pa.StructArray:
        header_type = type_.field("headers").type
        ts = pa.array([t * 1000 for t in self.timestamp], pa.int64()).cast(
            type_.field("timestamp").type)
        headers = pa.array([[{"key": k, "value": v} for k, v in h] for h in self.headers],
                           header_type)
        arrays = [pa.array(self.partition, type_.field("partition").type),
                  pa.array(self.offset, type_.field("offset").type), ts, headers,
                  pa.array(self.key, type_.field("key").type)]
        return pa.StructArray.from_arrays(arrays, fields=list(type_))
