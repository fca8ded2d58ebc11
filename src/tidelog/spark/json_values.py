"""Typed value columns from Confluent-framed JSON Schema values: the reader schema's Spark
type (objects with properties -> structs, required properties non-null; objects with only
``additionalProperties`` -> maps; arrays; ``integer`` -> long, ``number`` -> double;
``format: date`` / ``date-time`` -> date / timestamp; ``["T", "null"]`` and
``oneOf [T, {"type": "null"}]`` -> nullable T; anything else -> the JSON text), and each
value parsed and coerced into it. JSON has no resolution rules: records written with another
version read through the reader's type (unknown properties dropped, missing ones null)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SCALARS: dict[str, DataType] = {"integer": LongType(), "number": DoubleType(),
                                "boolean": BooleanType(), "null": NullType()}


def _deref(node: Any, root: Any) -> Any:
    for _ in range(32):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)
                and node["$ref"].startswith("#")):
            return node
        target = root
        for part in [p for p in node["$ref"][1:].split("/") if p]:
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node = target
    return node


def _kinds(node: dict[str, Any]) -> tuple[list[Any], bool]:
    """The non-null alternatives of a node and whether null is allowed."""
    kind = node.get("type")
    if isinstance(kind, list):
        return [{**node, "type": k} for k in kind if k != "null"], "null" in kind
    for key in ("oneOf", "anyOf"):
        if key in node and kind is None:
            rest = [b for b in node[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            return rest, len(rest) < len(node[key])
    return [node], False


def json_spark_type(node: Any, root: Any) -> tuple[DataType, bool]:
    node = _deref(node, root)
    if not isinstance(node, dict):
        return StringType(), True
    alternatives, nullable = _kinds(node)
    if len(alternatives) != 1:
        return StringType(), True
    node = _deref(alternatives[0], root)
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        props = node.get("properties")
        if props:
            required = set(node.get("required") or [])
            fields = []
            for name, sub in props.items():
                dtype, null = json_spark_type(sub, root)
                fields.append(StructField(name, dtype, null or name not in required))
            return StructType(fields), nullable
        extra = node.get("additionalProperties")
        value = json_spark_type(extra, root)[0] if isinstance(extra, dict) else StringType()
        return MapType(StringType(), value, True), nullable
    if kind == "array":
        items, null = json_spark_type(node.get("items", {}), root)
        return ArrayType(items, True), nullable
    if kind == "string":
        fmt = node.get("format")
        if fmt == "date":
            return DateType(), nullable
        if fmt == "date-time":
            return TimestampType(), nullable
        return StringType(), nullable
    if kind in SCALARS:
        return SCALARS[kind], nullable or kind == "null"
    return StringType(), True


def coerce(datum: Any, dtype: DataType) -> Any:
    """A parsed JSON value shaped for ``dtype`` (Arrow does the rest)."""
    if datum is None:
        return None
    if isinstance(dtype, StructType):
        if not isinstance(datum, dict):
            raise ValueError(f"expected an object, got {type(datum).__name__}")
        return {f.name: coerce(datum.get(f.name), f.dataType) for f in dtype.fields}
    if isinstance(dtype, ArrayType):
        return [coerce(d, dtype.elementType) for d in datum]
    if isinstance(dtype, MapType):
        return {k: coerce(v, dtype.valueType) for k, v in datum.items()}
    if isinstance(dtype, DateType):
        return dt.date.fromisoformat(datum)
    if isinstance(dtype, TimestampType):
        return dt.datetime.fromisoformat(str(datum).replace("Z", "+00:00"))
    if isinstance(dtype, DoubleType):
        return float(datum)
    if isinstance(dtype, StringType) and not isinstance(datum, str):
        return json.dumps(datum, separators=(",", ":"))
    return datum
