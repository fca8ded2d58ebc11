"""Typed value columns from Confluent-framed Protobuf values (Spark's ``from_protobuf``): the
reader message is the first message of the subject's version chosen at planning; its Spark
type maps messages to structs, repeated fields to arrays, map fields to maps, enums to their
names, ``google.protobuf.Timestamp`` to timestamp, int32/sint32/sfixed32 to int, the other
integers to long, bytes to binary. A value is parsed with the reader's message class after
Confluent's framing (magic byte, id, message indexes): Protobuf's own wire compatibility
(fields by number) is the resolution. Schemas come as base64 descriptors from the registry
(``format=serialized``) or, read from the ``_schemas`` files, as ``.proto`` text compiled by
protoc (grpcio-tools)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import importlib.resources
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import (  # noqa: F401 (the well-known types, loaded into the default pool)
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.internal.decoder import _DecodeVarint
from google.protobuf.message import Message
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tidelog.schema_registry.records import SchemaValue

from .options import OptionError

try:  # protoc, only for schemas read as .proto text (the _schemas files)
    from grpc_tools import protoc
except ImportError:  # pragma: no cover
    protoc = None

F = FieldDescriptor
SCALARS: dict[int, DataType] = {
    F.TYPE_INT32: IntegerType(), F.TYPE_SINT32: IntegerType(), F.TYPE_SFIXED32: IntegerType(),
    F.TYPE_INT64: LongType(), F.TYPE_SINT64: LongType(), F.TYPE_SFIXED64: LongType(),
    F.TYPE_UINT32: LongType(), F.TYPE_FIXED32: LongType(), F.TYPE_UINT64: LongType(),
    F.TYPE_FIXED64: LongType(), F.TYPE_FLOAT: FloatType(), F.TYPE_DOUBLE: DoubleType(),
    F.TYPE_BOOL: BooleanType(), F.TYPE_STRING: StringType(), F.TYPE_BYTES: BinaryType(),
    F.TYPE_ENUM: StringType(),
}
TIMESTAMP = "google.protobuf.Timestamp"
Resolve = Callable[[str, int], SchemaValue]  # (subject, version) -> a referenced schema


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf 6+; older ones only have label
    return bool(flag) if flag is not None else field.label == F.LABEL_REPEATED


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def spark_type(desc: Descriptor, stack: tuple[str, ...] = ()) -> StructType:
    if desc.full_name in stack:
        raise OptionError(f"Found recursive reference in Protobuf schema: {desc.full_name}")
    fields = []
    for field in desc.fields:
        fields.append(StructField(field.name, _field_type(field, (*stack, desc.full_name)), True))
    return StructType(fields)


def _field_type(field: FieldDescriptor, stack: tuple[str, ...]) -> DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return MapType(_single(key, stack), _single(value, stack), True)
    single = _single(field, stack)
    return ArrayType(single, False) if _repeated(field) else single


def _single(field: FieldDescriptor, stack: tuple[str, ...]) -> DataType:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return TimestampType()
        return spark_type(field.message_type, stack)
    return SCALARS[field.type]


def to_python(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _single_value(value_field, v) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [_single_value(field, v) for v in value]
        elif field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP) and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _single_value(field, value)
    return out


def _single_value(field: FieldDescriptor, value: Any) -> Any:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        if field.message_type.full_name == TIMESTAMP:
            return value.ToDatetime(tzinfo=dt.UTC)
        return to_python(value)
    if field.type == F.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return value


def _file_proto(text: str, name: str, sources: dict[str, str]) -> descriptor_pb2.FileDescriptorProto:
    """A schema as stored or served: a base64 descriptor, or .proto text (compiled)."""
    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
        proto.name = name
        return proto
    except (binascii.Error, ValueError):
        pass
    if protoc is None:
        raise ValueError("reading .proto text needs grpcio-tools (tidelog[schema-registry])")
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        for file, body in {**sources, name: text}.items():
            (Path(tmp) / file).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / file).write_text(body)
        out = Path(tmp) / "out.pb"
        if protoc.main(["protoc", f"-I{tmp}", f"-I{include}", f"--descriptor_set_out={out}",
                        name]) != 0:
            raise ValueError(f"protoc could not compile {name}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]


def message_class(value: SchemaValue, resolve: Resolve) -> type[Message]:
    """The first message of a registered Protobuf schema, built with its references."""
    pool = descriptor_pool.DescriptorPool()
    sources: dict[str, str] = {}
    added: set[str] = set()

    def add(text: str, name: str, refs: list[Any]) -> descriptor_pb2.FileDescriptorProto:
        for ref in refs:
            if ref.name not in added:
                dep = resolve(ref.subject, ref.version)
                add(dep.schema, ref.name, dep.references)
                sources[ref.name] = dep.schema
        proto = _file_proto(text, name, sources)
        for dep_name in proto.dependency:
            if dep_name.startswith("google/protobuf/") and dep_name not in added:
                well_known = descriptor_pb2.FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(dep_name).CopyToProto(well_known)
                pool.Add(well_known)
                added.add(dep_name)
        pool.Add(proto)
        added.add(name)
        return proto

    main = add(value.schema, "value.proto", value.references)
    full = ".".join(p for p in (main.package, main.message_type[0].name) if p)
    cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return cls


def decode(cls: type[Message], data: bytes) -> dict[str, Any]:
    """A framed value (after magic byte and id: Confluent's message indexes) to a dict."""
    count, pos = _DecodeVarint(data, 5)
    for _ in range((count >> 1) ^ -(count & 1)):
        _, pos = _DecodeVarint(data, pos)
    return to_python(cls.FromString(data[pos:]))
