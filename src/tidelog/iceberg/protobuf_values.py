"""Protobuf message descriptors (the registry's compiled files) -> Iceberg types, and messages
parsed by the protobuf runtime converted to those columns.

int32/sint32/sfixed32 -> int; int64/sint64/sfixed64/uint32 -> long; uint64/fixed64 -> long
(values above 2^63 wrap, as Redpanda's); fixed32 -> long; bool; float; double; string; bytes
-> binary; enum -> string (its name); message -> struct; repeated -> list; map -> map;
google.protobuf.Timestamp -> timestamptz. A message that contains itself: UnsupportedSchema."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from . import protobuf_native
from .columns import FieldIds
from .value_codec import UnsupportedSchema, ValueCodec, strip_prefix, zigzag_varint

log = logging.getLogger(__name__)
if TYPE_CHECKING:
    from .protobuf_bulk import BulkDecoder

Convert = Callable[[Any], Any]
_FD = FieldDescriptor
_SCALARS: dict[int, IcebergType] = {
    _FD.TYPE_INT32: IntegerType(), _FD.TYPE_SINT32: IntegerType(),
    _FD.TYPE_SFIXED32: IntegerType(), _FD.TYPE_INT64: LongType(), _FD.TYPE_SINT64: LongType(),
    _FD.TYPE_SFIXED64: LongType(), _FD.TYPE_UINT32: LongType(), _FD.TYPE_FIXED32: LongType(),
    _FD.TYPE_UINT64: LongType(), _FD.TYPE_FIXED64: LongType(), _FD.TYPE_BOOL: BooleanType(),
    _FD.TYPE_FLOAT: FloatType(), _FD.TYPE_DOUBLE: DoubleType(), _FD.TYPE_STRING: StringType(),
    _FD.TYPE_BYTES: BinaryType(),
}
_WRAP64 = {_FD.TYPE_UINT64, _FD.TYPE_FIXED64}


def _same(v: Any) -> Any:
    return v


def _wrap64(v: Any) -> Any:
    return v - (1 << 64) if v >= 1 << 63 else v


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _timestamp(m: Any) -> Any:
    """Whole microseconds (nanos cut toward zero, as the bulk path), no float rounding."""
    return _EPOCH + datetime.timedelta(seconds=m.seconds, microseconds=int(m.nanos / 1000))


class _Types:
    def __init__(self) -> None:
        self.ids = FieldIds()
        self.in_progress: set[str] = set()

    def message(self, desc: Descriptor) -> tuple[StructType, Convert]:
        if desc.full_name in self.in_progress:
            raise UnsupportedSchema(f"recursive message {desc.full_name} has no Iceberg type")
        self.in_progress.add(desc.full_name)
        fields, convs = [], []
        for f in desc.fields:
            t, conv = self.field(f)
            fields.append(NestedField(self.ids(), f.name, t, required=False))
            convs.append((f, conv))
        self.in_progress.discard(desc.full_name)

        def convert(m: Any) -> Any:
            return {f.name: conv(getattr(m, f.name)) if not _absent(m, f) else None
                    for f, conv in convs}

        return StructType(*fields), convert

    def field(self, f: FieldDescriptor) -> tuple[IcebergType, Convert]:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_t, key_c = self.single(f.message_type.fields_by_name["key"])
            val_t, val_c = self.single(f.message_type.fields_by_name["value"])
            return MapType(self.ids(), key_t, self.ids(), val_t, value_required=False), (
                lambda m: {key_c(k): val_c(v) for k, v in m.items()})
        t, conv = self.single(f)
        if _repeated(f):
            return ListType(self.ids(), t, element_required=False), (
                lambda vs: [conv(v) for v in vs])
        return t, conv

    def single(self, f: FieldDescriptor) -> tuple[IcebergType, Convert]:
        if f.type == _FD.TYPE_ENUM:
            enum = f.enum_type
            return StringType(), lambda v: (
                enum.values_by_number[v].name if v in enum.values_by_number else str(v))
        if f.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
            if f.message_type.full_name == "google.protobuf.Timestamp":
                return TimestamptzType(), _timestamp
            return self.message(f.message_type)
        if f.type not in _SCALARS:
            raise UnsupportedSchema(f"protobuf field type {f.type} of {f.full_name}")
        return _SCALARS[f.type], _wrap64 if f.type in _WRAP64 else _same


def _repeated(f: FieldDescriptor) -> bool:
    """``is_repeated`` (protobuf >= 5.28; ``label`` is gone in 7)."""
    repeated = getattr(f, "is_repeated", None)
    return bool(repeated) if repeated is not None else f.label == _FD.LABEL_REPEATED


def _absent(m: Any, f: FieldDescriptor) -> bool:
    """A singular message (or proto3 optional) field that is not set: null, not defaults."""
    return bool(f.has_presence and not _repeated(f) and not m.HasField(f.name))


def build_pool(main: FileDescriptorProto, dependencies: Mapping[str, FileDescriptorProto]
               ) -> descriptor_pool.DescriptorPool:
    from google.protobuf import timestamp_pb2  # noqa: F401 (in the default pool)

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: FileDescriptorProto) -> None:
        if proto.name in added:
            return
        for dep in proto.dependency:
            found = dependencies.get(dep)
            if found is None:  # a well-known type: from the default pool
                found = FileDescriptorProto()
                descriptor_pool.Default().FindFileByName(dep).CopyToProto(found)
            add(found)
        added.add(proto.name)
        pool.Add(proto)

    add(main)
    return pool


def message_descriptor(pool: descriptor_pool.DescriptorPool, file_name: str,
                       indexes: list[int]) -> Descriptor:
    """The message Confluent's message indexes name ([] or [0]: the file's first message)."""
    fd = pool.FindFileByName(file_name)
    path = indexes or [0]
    desc = list(fd.message_types_by_name.values())[path[0]]
    for i in path[1:]:
        desc = desc.nested_types[i]
    return desc


def read_message_indexes(payload: bytes) -> tuple[list[int], int]:
    """Confluent's framing after the schema id: a zig-zag count then that many indexes
    (a single 0 stands for [0])."""
    count, pos = zigzag_varint(payload, 0)
    if count < 0 or count > 100:
        raise ValueError(f"bad message index count {count}")
    out = []
    for _ in range(count):
        i, pos = zigzag_varint(payload, pos)
        out.append(i)
    return out, pos


class ProtobufCodec(ValueCodec):
    def __init__(self, desc: Descriptor) -> None:
        t, self._convert = _Types().message(desc)
        self.fields = list(t.fields)
        self._cls = message_factory.GetMessageClass(desc)
        self._bulk = _bulk_decoder(desc)
        self._plans: dict[pa.StructType, protobuf_native.Plan | None] = {}

    def decode_column(self, payloads: pa.Array, target: pa.StructType, skip: int = 0
                      ) -> tuple[pa.Array, dict[int, str]]:
        """All the payloads at once: the native core's strict pass (protobuf_native: the
        values it rejects decoded value by value); for a type it has no plan for, ptars
        (protobuf_bulk), with value by value the values the native walk refuses, or all of
        them when the runtime's check refuses one or the columns would differ (or when
        ptars cannot take them: then never again for this type)."""
        if skip:
            payloads = strip_prefix(payloads, skip)
        node = self._native_plan(target) if len(payloads) else None
        if node is not None:
            return protobuf_native.decode(payloads, target, node, lambda values: (
                ValueCodec.decode_column(self, values, target)))
        if self._bulk is not None and len(payloads):
            from .protobuf_bulk import Refused, RowsDiffer

            try:
                return self._bulk.decode(payloads, target), {}
            except Refused as refused:
                try:
                    return self._around(payloads, target, refused.rows)
                except RowsDiffer:
                    return super().decode_column(payloads, target)
            except RowsDiffer:
                return super().decode_column(payloads, target)
            except Exception as exc:
                values, bad = super().decode_column(payloads, target)
                if not bad:  # every value parses alone: it is the bulk path that cannot
                    log.info("Protobuf values of this type are decoded one by one: %s", exc)
                    self._bulk = None
                return values, bad
        return super().decode_column(payloads, target)

    def _native_plan(self, target: pa.StructType) -> protobuf_native.Plan | None:
        """The native pass's plan for ``target`` (None: no native core, or no plan)."""
        if not protobuf_native.available():
            return None
        if target not in self._plans:
            try:
                self._plans[target] = protobuf_native.plan(self._cls.DESCRIPTOR, target)
            except protobuf_native.NoPlan as exc:
                log.info("Protobuf values of this type are not decoded natively: %s", exc)
                self._plans[target] = None
        return self._plans[target]

    def _around(self, payloads: pa.Array, target: pa.StructType, refused: list[int]
                ) -> tuple[pa.Array, dict[int, str]]:
        """The values in bulk but the ``refused`` ones, those value by value, in order."""
        assert self._bulk is not None
        n = len(payloads)
        keep = np.ones(n, dtype=bool)
        keep[refused] = False
        taken = self._bulk.decode(payloads.filter(pa.array(keep)), target) if keep.any() else (
            pa.array([], target))
        again, bad = super().decode_column(payloads.take(pa.array(refused, pa.int64())), target)
        order = np.empty(n, dtype=np.int64)
        order[keep] = np.arange(len(taken))
        order[refused] = len(taken) + np.arange(len(refused))
        merged = pa.concat_arrays([taken, again.cast(target)]).take(pa.array(order))
        return merged, {refused[i]: reason for i, reason in bad.items()}

    def decode(self, payload: bytes) -> Mapping[str, object]:
        m = self._cls()
        m.ParseFromString(payload)
        row: Mapping[str, object] = self._convert(m)
        return row


def _bulk_decoder(desc: Descriptor) -> BulkDecoder | None:
    try:
        from .protobuf_bulk import BulkDecoder
    except ImportError as exc:  # ptars (the iceberg extra) not installed
        log.info("Protobuf values are decoded one by one: %s", exc)
        return None
    try:
        return BulkDecoder(desc)
    except Exception as exc:
        log.info("Protobuf values of %s are decoded one by one: %s", desc.full_name, exc)
        return None
