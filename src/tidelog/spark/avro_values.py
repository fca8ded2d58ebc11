"""Typed value columns from Confluent-framed Avro values (Spark's ``from_avro`` and ABRiS):
each record's writer schema is looked up by the id after its magic byte, and the datum is
resolved into one reader schema chosen at planning (a subject's latest or pinned version), so
a schema evolved mid-topic reads through the reader schema. Types follow Spark's Avro
mapping (SchemaConverters): records -> structs, arrays, maps (string keys), ``[null, T]`` ->
nullable T, other unions -> ``struct<member0, member1, ...>``, enums -> string, fixed and
bytes -> binary, date, timestamp-millis/micros (local-timestamp-* without zone), decimal.

The registry is read over its REST API (``schema.registry.url``) or, in log-dir mode, from
the ``_schemas`` topic's own files in the same log dirs: typed reads with no broker running.
Malformed values and unknown ids fail the read (``mode=FAILFAST``) or read as null
(``mode=PERMISSIVE``), as ``from_avro`` does."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fastavro
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
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
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from tidelog.schema_registry.records import Reference, SchemaValue
from tidelog.schema_registry.state import RegistryState
from tidelog.util.topic_partition import TopicPartition

from .backend import BackendSpec
from .json_values import coerce, json_spark_type
from .options import OptionError
from .protobuf_values import decode as decode_protobuf
from .protobuf_values import message_class
from .protobuf_values import spark_type as protobuf_spark_type

if TYPE_CHECKING:
    from google.protobuf.message import Message

PRIMITIVE: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
LOGICAL: dict[tuple[str, str], DataType] = {
    ("int", "date"): DateType(),
    ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(),
    ("long", "local-timestamp-millis"): TimestampNTZType(),
    ("long", "local-timestamp-micros"): TimestampNTZType(),
}
MODES = ("FAILFAST", "PERMISSIVE")


class SparkAvroTypes:
    """Spark's SchemaConverters.toSqlType over an Avro schema in JSON form."""

    def __init__(self) -> None:
        # a named type: its node and its namespace
        self.named: dict[str, tuple[dict[str, Any], str | None]] = {}
        self.stack: list[str] = []

    def convert(self, node: Any, space: str | None = None) -> tuple[DataType, bool]:
        """(Spark type, nullable)."""
        if isinstance(node, str):
            if node in PRIMITIVE:
                return PRIMITIVE[node], node == "null"
            full = node if "." in node or not space else f"{space}.{node}"
            found = self.named.get(full, self.named.get(node))
            if found is None:
                raise OptionError(f"the Avro schema names an unknown type {node}")
            return self.convert(found[0], found[1])
        if isinstance(node, list):
            return self._union(node, space)
        kind = node["type"]
        logical = node.get("logicalType")
        if isinstance(kind, str) and (kind, logical) in LOGICAL:
            return LOGICAL[(kind, logical)], False
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return DecimalType(int(node["precision"]), int(node.get("scale", 0))), False
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(node, space)
        if kind == "array":
            items, null = self.convert(node["items"], space)
            return ArrayType(items, null), False
        if kind == "map":
            values, null = self.convert(node["values"], space)
            return MapType(StringType(), values, null), False
        return self.convert(kind, space)

    def _named(self, node: dict[str, Any], space: str | None) -> tuple[DataType, bool]:
        name = str(node["name"])
        own = name.rsplit(".", 1)[0] if "." in name else (node.get("namespace") or space)
        full = name if "." in name else (f"{own}.{name}" if own else name)
        self.named[full] = (node, own)
        if node["type"] == "enum":
            return StringType(), False
        if node["type"] == "fixed":
            return BinaryType(), False
        if full in self.stack:
            raise OptionError(f"Found recursive reference in Avro schema, which can not be "
                              f"processed by Spark: {full}")
        self.stack.append(full)
        fields = []
        for f in node["fields"]:
            dtype, null = self.convert(f["type"], own)
            fields.append(StructField(f["name"], dtype, null))
        self.stack.pop()
        return StructType(fields), False

    def _union(self, branches: list[Any], space: str | None) -> tuple[DataType, bool]:
        has_null = "null" in branches
        rest = [b for b in branches if b != "null"]
        if len(rest) == 1:
            return self.convert(rest[0], space)[0], has_null
        if set(map(str, rest)) <= {"int", "long"}:
            return LongType(), has_null
        if set(map(str, rest)) <= {"float", "double"}:
            return DoubleType(), has_null
        members = [StructField(f"member{i}", self.convert(b, space)[0], True)
                   for i, b in enumerate(rest)]
        return StructType(members), has_null


# -- the registry, over HTTP or from the _schemas files -----------------------------------------
class HttpSchemas:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str) -> Any:
        req = urllib.request.Request(self.url + path, headers={
            "Accept": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def version(self, subject: str, version: int | None, serialized: bool = False) -> SchemaValue:
        """``serialized``: Protobuf as a base64 descriptor (no protoc needed to read it)."""
        v = "latest" if version is None else str(version)
        fmt = "?format=serialized" if serialized else ""
        found = self._get(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{v}{fmt}")
        return SchemaValue.from_json(found)

    def by_id(self, schema_id: int) -> SchemaValue | None:
        try:
            found = self._get(f"/schemas/ids/{schema_id}")
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise
        return SchemaValue.from_json({"subject": "", "version": 0, "id": schema_id, **found})


class LogDirSchemas:
    """The registry's state read from the ``_schemas`` partition in the log dirs."""

    def __init__(self, paths: tuple[str, ...], topic: str = "_schemas") -> None:
        self.state = RegistryState()
        backend = BackendSpec(paths=paths).open()
        try:
            tp = TopicPartition(topic, 0)
            if topic not in backend.topics():
                raise OptionError(f"no {topic} topic in {', '.join(paths)} to read schemas from")
            start, end = backend.earliest([tp])[tp], backend.latest([tp])[tp]
            for batch in backend.batches(tp, start, end):
                if batch.is_control:
                    continue
                for record in batch.iter_records():
                    self.state.apply(record.key, record.value, record.offset)
        finally:
            backend.close()

    def version(self, subject: str, version: int | None, serialized: bool = False) -> SchemaValue:
        found = (self.state.latest(subject) if version is None
                 else self.state.get(subject, version))
        if found is None or found.deleted:
            raise OptionError(f"subject {subject} has no version {version or 'latest'}")
        return found

    def by_id(self, schema_id: int) -> SchemaValue | None:
        return self.state.by_id(schema_id)


Schemas = HttpSchemas | LogDirSchemas


def _named_texts(schemas: Schemas, refs: list[Reference], seen: set[tuple[str, int]]) -> list[str]:
    """Texts of the referenced schemas, dependencies first."""
    out: list[str] = []
    for ref in refs:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        value = schemas.version(ref.subject, ref.version)
        out += _named_texts(schemas, value.references, seen)
        out.append(value.schema)
    return out


@dataclass(frozen=True)
class TypedValueSpec:
    """Everything an executor needs to decode the value column (pickled with each partition)."""

    reader_schema: str
    reader_named: tuple[str, ...]
    registry_url: str | None
    paths: tuple[str, ...]
    mode: str = "FAILFAST"
    fmt: str = "AVRO"  # or JSON (json_values.py), PROTOBUF (protobuf_values.py)
    reader_refs: tuple[tuple[str, str, int], ...] = ()  # Protobuf: (name, subject, version)
    column: str = "value"  # or "key" (keyFormat)

    def reader_value(self) -> SchemaValue:
        refs = [Reference(n, s, v) for n, s, v in self.reader_refs]
        return SchemaValue("", 0, 0, self.reader_schema, self.fmt, refs)

    def spark_type(self) -> tuple[DataType, bool]:
        if self.fmt == "PROTOBUF":
            schemas = self.schemas()
            cls = message_class(self.reader_value(),
                                lambda s, v: schemas.version(s, v, serialized=True))
            return protobuf_spark_type(cls.DESCRIPTOR), True
        if self.fmt == "JSON":
            root = json.loads(self.reader_schema)
            return json_spark_type(root, root)
        types = SparkAvroTypes()
        for text in self.reader_named:
            types.convert(json.loads(text))
        return types.convert(json.loads(self.reader_schema))

    def schemas(self) -> Schemas:
        if self.registry_url:
            return HttpSchemas(self.registry_url)
        return LogDirSchemas(self.paths)


def typed_specs(
    options: dict[str, str], topics: list[str], paths: tuple[str, ...]
) -> tuple[TypedValueSpec, ...]:
    """The typed key and value columns asked for (keyFormat, valueFormat), resolved on the
    driver; () when neither is set."""
    found = (value_spec(options, topics, paths, column) for column in ("key", "value"))
    return tuple(spec for spec in found if spec is not None)


def value_spec(
    options: dict[str, str], topics: list[str], paths: tuple[str, ...], column: str = "value"
) -> TypedValueSpec | None:
    """One typed column's options (lower-cased keys) resolved on the driver, or None."""
    fmt = options.get(f"{column}format")
    if fmt is None:
        return None
    if fmt.lower() not in ("avro", "json", "protobuf"):
        raise OptionError(f"{column}Format {fmt!r}: expected avro, json or protobuf")
    mode = options.get("mode", "FAILFAST").upper()
    if mode not in MODES:
        raise OptionError(f"mode {mode!r}: expected FAILFAST or PERMISSIVE")
    url = options.get("schema.registry.url") or options.get("schemaregistryurl")
    if not url and not paths:
        raise OptionError(f"{column}Format needs schema.registry.url (or a log-dir path)")
    subject = options.get(f"{column}subject")
    if subject is None:
        if len(topics) != 1:
            raise OptionError(f"{column}Format over several topics needs {column}Subject")
        subject = f"{topics[0]}-{column}"
    pinned = options.get(f"{column}schemaversion", "latest")
    version = None if pinned in ("latest", "-1") else int(pinned)
    spec = TypedValueSpec("", (), url or None, paths, mode)
    schemas = spec.schemas()
    reader = schemas.version(subject, version, serialized=fmt.upper() == "PROTOBUF")
    if reader.schema_type != fmt.upper():
        raise OptionError(f"valueFormat={fmt} but {subject} holds a {reader.schema_type} schema")
    if reader.schema_type == "JSON":
        return TypedValueSpec(reader.schema, (), url or None, paths, mode, "JSON",
                              column=column)
    if reader.schema_type == "PROTOBUF":
        refs = tuple((r.name, r.subject, r.version) for r in reader.references)
        return TypedValueSpec(reader.schema, (), url or None, paths, mode, "PROTOBUF", refs,
                              column)
    named = tuple(_named_texts(schemas, reader.references, set()))
    return TypedValueSpec(reader.schema, named, url or None, paths, mode, column=column)


def spec_is_not_avro(spec: TypedValueSpec) -> bool:
    return spec.fmt != "AVRO"


def typed_schema(base: StructType, specs: tuple[TypedValueSpec, ...]) -> StructType:
    """Spark's Kafka schema with each typed column's struct in place of its bytes."""
    types = {spec.column: spec.spark_type()[0] for spec in specs}
    return StructType([StructField(f.name, types[f.name], True) if f.name in types else f
                       for f in base.fields])


class ValueDecoder:
    """Decodes the value column of the source's Arrow batches (one per executor task)."""

    def __init__(self, spec: TypedValueSpec) -> None:
        self.spec = spec
        self.schemas = spec.schemas()
        self.spark_type = spec.spark_type()[0]
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")
        self.json = spec.fmt == "JSON"
        self.protobuf: type[Message] | None = None
        if spec.fmt == "PROTOBUF":
            schemas = self.schemas
            self.protobuf = message_class(spec.reader_value(),
                                          lambda s, v: schemas.version(s, v, serialized=True))
        self.reader = None if spec.fmt != "AVRO" else self._parse(spec.reader_schema,
                                                                  list(spec.reader_named))
        self.writers: dict[int, Any] = {}
        self.unions = spec.fmt == "AVRO" and _has_multi_union(json.loads(spec.reader_schema))

    @staticmethod
    def _parse(text: str, named_texts: list[str]) -> Any:
        named: dict[str, Any] = {}
        for t in named_texts:
            fastavro.parse_schema(json.loads(t), named_schemas=named)
        return fastavro.parse_schema(json.loads(text), named_schemas=named)

    def _writer(self, schema_id: int) -> Any:
        found = self.writers.get(schema_id)
        if found is None:
            value = self.schemas.by_id(schema_id)
            if value is None or value.schema_type != self.spec.fmt:
                raise ValueError(f"schema id {schema_id} is not a registered "
                                 f"{self.spec.fmt} schema")
            if spec_is_not_avro(self.spec):
                found = self.writers[schema_id] = True
                return found
            named = _named_texts(self.schemas, value.references, set())
            found = self.writers[schema_id] = self._parse(value.schema, named)
        return found

    def decode_one(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 5 or data[0] != 0:
            raise ValueError("the value lacks Confluent's magic byte and schema id")
        writer = self._writer(int.from_bytes(data[1:5], "big"))
        if self.json:
            return coerce(json.loads(data[5:]), self.spark_type)
        if self.protobuf is not None:
            return decode_protobuf(self.protobuf, data)
        datum = fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, self.reader)
        return _members(datum, json.loads(self.spec.reader_schema)) if self.unions else datum

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        name = self.spec.column
        index = batch.schema.get_field_index(name)
        raw = batch.column(index).to_pylist()
        out = []
        for i, data in enumerate(raw):
            try:
                out.append(self.decode_one(data))
            except Exception as exc:
                if self.spec.mode == "PERMISSIVE":
                    out.append(None)
                    continue
                offset = batch.column(batch.schema.get_field_index("offset"))[i].as_py()
                raise RuntimeError(
                    f"Malformed records are detected in record parsing (offset {offset}): {exc}. "
                    "Current parse Mode: FAILFAST. To process malformed records as null result, "
                    "try setting the option 'mode' as 'PERMISSIVE'."
                ) from exc
        typed = pa.array(out, type=self.arrow_type)
        fields = [pa.field(name, self.arrow_type) if f.name == name else f
                  for f in batch.schema]
        arrays = [typed if i == index else c for i, c in enumerate(batch.columns)]
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _has_multi_union(node: Any) -> bool:
    if isinstance(node, list):
        return len([b for b in node if b != "null"]) > 1 or any(map(_has_multi_union, node))
    if isinstance(node, dict):
        return any(_has_multi_union(v) for k, v in node.items() if k in (
            "type", "items", "values", "fields")) or (
            "fields" in node and any(_has_multi_union(f.get("type")) for f in node["fields"]))
    return False


_PY = {"boolean": bool, "int": int, "long": int, "float": float, "double": float,
       "string": str, "bytes": bytes}


def _members(datum: Any, node: Any) -> Any:
    """fastavro's union values -> Spark's ``member<i>`` structs (multi-type unions only)."""
    if datum is None:
        return None
    if isinstance(node, list):
        rest = [b for b in node if b != "null"]
        if len(rest) == 1:
            return _members(datum, rest[0])
        if set(map(str, rest)) <= {"int", "long"} or set(map(str, rest)) <= {"float", "double"}:
            return datum
        for i, branch in enumerate(rest):
            kind = branch if isinstance(branch, str) else branch.get("type")
            if isinstance(datum, _PY.get(str(kind), dict)) and not (
                    isinstance(datum, bool) and kind != "boolean"):
                return {f"member{i}": _members(datum, branch)}
        return None
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error") and isinstance(datum, dict):
            return {f["name"]: _members(datum.get(f["name"]), f["type"]) for f in node["fields"]}
        if kind == "array" and isinstance(datum, list):
            return [_members(d, node["items"]) for d in datum]
        if kind == "map" and isinstance(datum, dict):
            return {k: _members(v, node["values"]) for k, v in datum.items()}
    return datum
