"""Avro schemas (as the registry parsed them) -> Iceberg types, and values decoded by fastavro.

Mapping (Redpanda's): boolean, int, long, float, double, string, bytes; enum -> string;
fixed -> fixed; record -> struct; array -> list; map -> map<string, V>; a union of null and
one type -> that type (optional); date, time-millis/micros, timestamp-millis/micros (->
timestamptz), local-timestamp-* (-> timestamp), decimal. A union of two or more non-null
types has no Iceberg counterpart here: UnsupportedSchema (its records go to the DLQ)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping
from typing import Any

import fastavro
import pyarrow as pa
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from . import avro_bulk, avro_native
from .columns import VALUE, FieldIds
from .value_codec import UnsupportedSchema, ValueCodec

log = logging.getLogger(__name__)

_PRIMITIVES: dict[str, IcebergType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "string": StringType(), "bytes": BinaryType(),
}
_LOGICAL: dict[str, IcebergType] = {
    "date": DateType(), "time-millis": TimeType(), "time-micros": TimeType(),
    "timestamp-millis": TimestamptzType(), "timestamp-micros": TimestamptzType(),
    "local-timestamp-millis": TimestampType(), "local-timestamp-micros": TimestampType(),
    "uuid": StringType(),
}


class _Types:
    def __init__(self) -> None:
        self.ids = FieldIds()
        self.named: dict[str, IcebergType] = {}
        self.in_progress: set[str] = set()

    def of(self, node: Any, space: str | None = None) -> IcebergType:
        if isinstance(node, str):
            return self._named_or_primitive(node, space)
        if isinstance(node, list):
            return self._union(node, space)
        logical = node.get("logicalType")
        if logical == "decimal":
            return DecimalType(int(node["precision"]), int(node.get("scale", 0)))
        if logical in _LOGICAL:
            return _LOGICAL[logical]
        kind = node["type"]
        if kind == "record" or kind == "error":
            return self._record(node, space)
        if kind == "enum":
            return self._remember(node, space, StringType())
        if kind == "fixed":
            return self._remember(node, space, FixedType(int(node["size"])))
        if kind == "array":
            return ListType(self.ids(), self.of(node["items"], space), element_required=False)
        if kind == "map":
            return MapType(self.ids(), StringType(), self.ids(), self.of(node["values"], space),
                           value_required=False)
        return self.of(kind, space)

    def _named_or_primitive(self, name: str, space: str | None) -> IcebergType:
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        full = name if "." in name or not space else f"{space}.{name}"
        for candidate in (full, name):
            if candidate in self.in_progress:
                raise UnsupportedSchema(f"recursive Avro type {candidate} has no Iceberg type")
            if candidate in self.named:
                return self.named[candidate]
        raise UnsupportedSchema(f"unknown Avro type {name!r}")

    def _union(self, branches: list[Any], space: str | None) -> IcebergType:
        others = [b for b in branches if b != "null"]
        if len(others) != 1:
            raise UnsupportedSchema(
                f"an Avro union of {len(others)} non-null types has no Iceberg type")
        return self.of(others[0], space)

    def _full_name(self, node: Mapping[str, Any], space: str | None) -> tuple[str, str | None]:
        name = str(node["name"])
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        ns = node.get("namespace", space)
        return (f"{ns}.{name}" if ns else name), ns

    def _remember(self, node: Mapping[str, Any], space: str | None, t: IcebergType) -> IcebergType:
        self.named[self._full_name(node, space)[0]] = t
        return t

    def _record(self, node: Mapping[str, Any], space: str | None) -> IcebergType:
        full, ns = self._full_name(node, space)
        self.in_progress.add(full)
        fields = [NestedField(self.ids(), f["name"], self.of(f["type"], ns), required=False,
                              doc=f.get("doc")) for f in node["fields"]]
        self.in_progress.discard(full)
        t = StructType(*fields)
        self.named[full] = t
        return t


class AvroCodec(ValueCodec):
    def __init__(self, schema_json: Any) -> None:
        """``schema_json``: the writer's schema, self-contained (references expanded)."""
        self.schema = schema_json
        t = _Types().of(schema_json)
        self._record = isinstance(t, StructType)
        self.fields = list(t.fields) if isinstance(t, StructType) else [
            NestedField(1, VALUE, t, required=False)]
        self._parsed = fastavro.parse_schema(schema_json)
        # fastavro gives uuid logical values as UUID objects; their column is a string
        self._uuids = '"uuid"' in json.dumps(schema_json)
        self._plans: dict[pa.StructType, avro_native.Plan | None] = {}
        self._bulk_header: bytes | None = None
        if avro_bulk.polars_reads(schema_json):
            try:
                self._bulk_header = avro_bulk.container_header(
                    avro_bulk.bulk_schema(schema_json, self._record))
            except (ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException):
                pass

    def decode_column(self, payloads: pa.Array, target: pa.StructType, skip: int = 0
                      ) -> tuple[pa.Array, dict[int, str]]:
        """The native core's strict pass over all the payloads at once (avro_native: the
        values it rejects decoded value by value); for a schema it has no plan for,
        Polars' Avro reader (avro_bulk), value by value when that block does not read back
        whole (a bad value among them, or a type Polars does not read: then never again for
        this schema)."""
        node = self._native_plan(target) if len(payloads) else None
        if node is not None:
            return avro_native.decode(payloads, target, node, skip, lambda values: (
                ValueCodec.decode_column(self, values, target, skip)))
        if self._bulk_header is not None and len(payloads):
            try:
                return avro_bulk.decode(self._bulk_header, payloads, target, skip), {}
            except Exception as exc:
                values, bad = super().decode_column(payloads, target, skip)
                if not bad:  # every value parses alone: it is Polars that cannot
                    log.info("Avro values of this schema are decoded one by one: %s", exc)
                    self._bulk_header = None
                return values, bad
        return super().decode_column(payloads, target, skip)

    def _native_plan(self, target: pa.StructType) -> avro_native.Plan | None:
        """The native pass's plan for ``target`` (None: no native core, or no plan)."""
        if not avro_native.available() or self._uuids:
            return None
        if target not in self._plans:
            try:
                self._plans[target] = avro_native.plan(self.schema, target, self._record)
            except avro_native.NoPlan as exc:
                log.info("Avro values of this schema are not decoded natively: %s", exc)
                self._plans[target] = None
        return self._plans[target]

    def decode(self, payload: bytes) -> Mapping[str, object]:
        buf = io.BytesIO(payload)
        value = fastavro.schemaless_reader(buf, self._parsed, None)
        if buf.tell() != len(payload):
            raise ValueError(f"{len(payload) - buf.tell()} bytes left after the Avro value")
        if self._uuids:
            value = _strings_for_uuids(value)
        if self._record:
            assert isinstance(value, dict)
            return value
        return {VALUE: value}


def _strings_for_uuids(v: Any) -> Any:
    import uuid

    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: _strings_for_uuids(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_strings_for_uuids(x) for x in v]
    return v


def self_contained(parsed_schema: Any) -> Any:
    """The registry's parsed Avro schema (the avro library's, references resolved) as one
    JSON document with every named type it uses defined inline."""
    return json.loads(str(parsed_schema))
