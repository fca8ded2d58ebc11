"""JSON Schema -> Iceberg types, and JSON values converted to those columns.

object with properties -> struct; string -> string (format date-time -> timestamptz, date ->
date); integer -> long; number -> double; boolean; array with items -> list; a type list of
null and one type -> that type. ``$ref`` to ``#/definitions`` or ``#/$defs`` is followed.
Anything else (no type, several non-null types, an object without properties) has no typed
column: UnsupportedSchema."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    IcebergType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from . import json_bulk, json_native
from .columns import VALUE, FieldIds
from .value_codec import UnsupportedSchema, ValueCodec

Convert = Callable[[Any], Any]


def _same(v: Any) -> Any:
    return v


def _timestamp(v: Any) -> Any:
    if v is None:
        return None
    ts = datetime.datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=datetime.UTC)


def _date(v: Any) -> Any:
    return None if v is None else datetime.date.fromisoformat(str(v))


class _Types:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.ids = FieldIds()

    def _deref(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        for prefix in ("#/definitions/", "#/$defs/"):
            if ref.startswith(prefix):
                section = self.root.get(prefix[2:-1], {})
                return self._deref(section[ref[len(prefix):]])
        raise UnsupportedSchema(f"$ref {ref!r} is not a local definition")

    def of(self, node: Any) -> tuple[IcebergType, Convert]:
        if not isinstance(node, Mapping):
            raise UnsupportedSchema("a boolean JSON Schema has no typed columns")
        node = self._deref(node)
        kind = node.get("type")
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            if len(others) != 1:
                raise UnsupportedSchema(f"JSON type {kind} has no single Iceberg type")
            kind = others[0]
        if kind == "object":
            return self._object(node)
        if kind == "array":
            items, conv = self.of(node.get("items", {}))
            return ListType(self.ids(), items, element_required=False), (
                lambda v: None if v is None else [conv(x) for x in v])
        if kind == "string":
            fmt = node.get("format")
            if fmt == "date-time":
                return TimestamptzType(), _timestamp
            if fmt == "date":
                return DateType(), _date
            return StringType(), _same
        simple: dict[str, IcebergType] = {"integer": LongType(), "number": DoubleType(),
                                          "boolean": BooleanType()}
        if kind in simple:
            return simple[kind], (lambda v: None if v is None else float(v)) if (
                kind == "number") else _same
        raise UnsupportedSchema(f"JSON Schema type {kind!r} has no Iceberg type")

    def _object(self, node: Mapping[str, Any]) -> tuple[IcebergType, Convert]:
        props = node.get("properties")
        if not isinstance(props, Mapping) or not props:
            raise UnsupportedSchema("a JSON object without properties has no typed columns")
        fields, convs = [], {}
        for name, sub in props.items():
            t, conv = self.of(sub)
            fields.append(NestedField(self.ids(), name, t, required=False))
            convs[name] = conv

        def convert(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, Mapping):
                raise ValueError(f"expected a JSON object, got {type(v).__name__}")
            return {k: c(v.get(k)) for k, c in convs.items()}

        return StructType(*fields), convert


class JsonCodec(ValueCodec):
    def __init__(self, schema_json: Any) -> None:
        types = _Types(schema_json if isinstance(schema_json, Mapping) else {})
        t, self._convert = types.of(schema_json)
        self._record = isinstance(t, StructType)
        self.fields = list(t.fields) if isinstance(t, StructType) else [
            NestedField(1, VALUE, t, required=False)]

    def decode(self, payload: bytes) -> Mapping[str, object]:
        value = self._convert(json.loads(payload))
        return value if self._record else {VALUE: value}

    def decode_column(self, payloads: pa.Array, target: pa.StructType, skip: int = 0
                      ) -> tuple[pa.Array, dict[int, str]]:
        """The native core's strict pass over all the objects at once (json_native: the
        values it rejects are decoded value by value); without the native core, pyarrow's
        JSON reader (json_bulk), value by value when they do not read back one row each."""
        if self._record and len(payloads) and not payloads.null_count:
            if json_native.available():
                try:
                    return json_native.decode(
                        payloads, target, StructType(*self.fields), skip,
                        lambda rest: ValueCodec.decode_column(self, rest, target, skip))
                except (json_native.NoPlan, pa.ArrowException, ValueError, TypeError):
                    pass  # e.g. a date-time string pyarrow's cast does not read
            if json_bulk.plain_objects(payloads, skip):
                try:
                    return json_bulk.decode(payloads, target, skip), {}
                except (pa.ArrowException, ValueError, TypeError):
                    pass
        return super().decode_column(payloads, target, skip)
