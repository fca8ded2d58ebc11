"""Writes of a struct ``value`` column as Confluent-framed Avro (Spark's ``to_avro`` with a
registry, as ABRiS does): with ``valueFormat=avro`` the value struct is encoded with a given
schema (``valueSchema``, or ``valueSchemaId`` of a registered one) or with the Avro schema
Spark derives from the struct (SchemaConverters.toAvroType: record ``topLevelRecord``,
nested records named by their field in the parent's namespace, nullable fields as
``[T, "null"]``), registered under ``valueSubject`` (default ``<topic>-value``) when the write
is planned; every value is then magic byte 0, the id, the Avro body."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .options import OptionError

SIMPLE: list[tuple[type, Any]] = [
    (BooleanType, "boolean"), (IntegerType, "int"), (LongType, "long"), (FloatType, "float"),
    (DoubleType, "double"), (StringType, "string"), (BinaryType, "bytes"),
    (DateType, {"type": "int", "logicalType": "date"}),
    (TimestampType, {"type": "long", "logicalType": "timestamp-micros"}),
    (TimestampNTZType, {"type": "long", "logicalType": "local-timestamp-micros"}),
]


def avro_type(dtype: DataType, nullable: bool, name: str = "topLevelRecord",
              space: str = "") -> Any:
    """Spark's SchemaConverters.toAvroType."""
    found: Any = None
    for kind, avro in SIMPLE:
        if isinstance(dtype, kind):
            found = avro
    if isinstance(dtype, DecimalType):
        found = {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision,
                 "scale": dtype.scale}
    elif isinstance(dtype, ArrayType):
        found = {"type": "array", "items": avro_type(dtype.elementType, dtype.containsNull,
                                                     name, space)}
    elif isinstance(dtype, MapType):
        if not isinstance(dtype.keyType, StringType):
            raise OptionError("Avro maps need string keys")
        found = {"type": "map", "values": avro_type(dtype.valueType, dtype.valueContainsNull,
                                                    name, space)}
    elif isinstance(dtype, StructType):
        child = f"{space}.{name}" if space else name
        found = {"type": "record", "name": name, "fields": [
            {"name": f.name, "type": avro_type(f.dataType, f.nullable, f.name, child)}
            for f in dtype.fields]}
        if space:
            found["namespace"] = space
    if found is None:
        raise OptionError(f"no Avro type for {dtype.simpleString()}")
    return [found, "null"] if nullable else found


@dataclass(frozen=True)
class TypedWriteSpec:
    schema_id: int
    schema: str


def _call(url: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method, headers={
        "Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def write_spec(options: dict[str, str], value: DataType, topic: str | None) -> TypedWriteSpec | None:
    """The schema and id the values are written with (registered now), or None (bytes)."""
    fmt = options.get("valueformat")
    if fmt is None:
        return None
    if fmt.lower() != "avro":
        raise OptionError(f"valueFormat {fmt!r}: only avro is supported")
    url = options.get("schema.registry.url") or options.get("schemaregistryurl")
    if not url:
        raise OptionError("valueFormat=avro needs schema.registry.url")
    if not isinstance(value, StructType):
        raise OptionError(f"valueFormat=avro writes a struct value column, got {value.simpleString()}")
    if "valueschemaid" in options:
        schema_id = int(options["valueschemaid"])
        return TypedWriteSpec(schema_id, str(_call(url, "GET", f"/schemas/ids/{schema_id}")["schema"]))
    subject = options.get("valuesubject") or (f"{topic}-value" if topic else None)
    if subject is None:
        raise OptionError("valueFormat=avro needs the topic option or valueSubject")
    text = options.get("valueschema") or json.dumps(avro_type(value, False))
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
    try:
        schema_id = int(_call(url, "POST", path, {"schema": text})["id"])
    except urllib.error.HTTPError as err:
        raise OptionError(f"registering the value schema under {subject} failed: "
                          f"{err.read().decode(errors='replace')}") from None
    return TypedWriteSpec(schema_id, text)


class ValueEncoder:
    def __init__(self, spec: TypedWriteSpec) -> None:
        self.node = json.loads(spec.schema)
        self.parsed = fastavro.parse_schema(self.node)
        self.prefix = b"\x00" + spec.schema_id.to_bytes(4, "big")

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        index = batch.schema.get_field_index("value")
        out: list[bytes | None] = []
        for datum in batch.column(index).to_pylist():
            if datum is None:
                out.append(None)
                continue
            buf = io.BytesIO()
            buf.write(self.prefix)
            fastavro.schemaless_writer(buf, self.parsed, _maps_as_dicts(datum, self.node))
            out.append(buf.getvalue())
        fields = [pa.field("value", pa.binary()) if f.name == "value" else f for f in batch.schema]
        arrays = [pa.array(out, pa.binary()) if i == index else c
                  for i, c in enumerate(batch.columns)]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _maps_as_dicts(datum: Any, node: Any) -> Any:
    """Arrow hands maps over as lists of (key, value) pairs; Avro wants dicts."""
    if datum is None:
        return None
    if isinstance(node, list):
        branch = next((b for b in node if b != "null"), "null")
        return _maps_as_dicts(datum, branch)
    if not isinstance(node, dict):
        return datum
    kind = node.get("type")
    if kind == "record":
        return {f["name"]: _maps_as_dicts(datum.get(f["name"]), f["type"]) for f in node["fields"]}
    if kind == "array":
        return [_maps_as_dicts(d, node["items"]) for d in datum]
    if kind == "map":
        pairs = datum.items() if isinstance(datum, dict) else datum
        return {k: _maps_as_dicts(v, node["values"]) for k, v in pairs}
    return datum
