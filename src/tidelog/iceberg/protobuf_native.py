"""Many Protobuf (proto3) values of one message type decoded by the native core in one pass,
straight into the table's Arrow columns (``tidelog._native`` ``proto_columns``). The pass is
strict: it takes a value only when the protobuf runtime (the reference, value by value)
would give exactly those columns, and rejects the others one by one (malformed wire data, a
known field under another wire type, a singular field sent twice, a string that is not
UTF-8, a Timestamp outside years 1 to 9999, a float NaN). The rejected values are decoded by
the reference, which takes them with its own rules or sends them to the DLQ with its
reason, and are put back in their rows.

The message types it reads: proto3 files, every scalar type, enums, nested messages,
repeated fields and google.protobuf.Timestamp; a type with a map, a oneof of two or more
fields or a proto2/editions file has no plan: ptars (protobuf_bulk) decodes it. Measured
by bench/iceberg_values.py on the bench's Order values (100,000, CPU time, the paths in
turn): ptars after the native walk about 1.3x this pass's cost, after the runtime's check
about 2x. The pass hands its column buffers to Arrow as they are (not copied into bytes):
decode_column 175-220 ns a value at a load average of 4-5 on two cores, 210-280 with the
copies, in turn in the same sitting."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from .._native import core
from .native_arrays import Kinds, column_array

(ABSENT, I32, SI32, U32, I64, SI64, BOOL, F32, F64, FX32U, SFX32, FX64, STRING, BYTES,
 ENUM, STRUCT, LIST, TS) = range(18)
MAX_NODES, MAX_FIELDS = 1024, 64
_KINDS = Kinds(ABSENT, STRUCT, LIST, BOOL, frozenset((STRING, BYTES, ENUM)))

# (kind, field number, presence, large offsets, children, an enum's (number, name)s)
Plan = tuple[int, int, int, int, tuple["Plan", ...], tuple[tuple[int, bytes], ...]]
Reference = Callable[[pa.Array], tuple[pa.Array, dict[int, str]]]

_FD = FieldDescriptor
_SCALARS: dict[int, tuple[int, Callable[[pa.DataType], bool]]] = {
    _FD.TYPE_INT32: (I32, pa.types.is_int32), _FD.TYPE_SINT32: (SI32, pa.types.is_int32),
    _FD.TYPE_SFIXED32: (SFX32, pa.types.is_int32), _FD.TYPE_UINT32: (U32, pa.types.is_int64),
    _FD.TYPE_INT64: (I64, pa.types.is_int64), _FD.TYPE_UINT64: (I64, pa.types.is_int64),
    _FD.TYPE_SINT64: (SI64, pa.types.is_int64), _FD.TYPE_FIXED32: (FX32U, pa.types.is_int64),
    _FD.TYPE_FIXED64: (FX64, pa.types.is_int64), _FD.TYPE_SFIXED64: (FX64, pa.types.is_int64),
    _FD.TYPE_BOOL: (BOOL, pa.types.is_boolean), _FD.TYPE_FLOAT: (F32, pa.types.is_float32),
    _FD.TYPE_DOUBLE: (F64, pa.types.is_float64),
    _FD.TYPE_STRING: (STRING, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    _FD.TYPE_BYTES: (BYTES, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    _FD.TYPE_ENUM: (ENUM, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
}
_LARGE = (pa.types.is_large_string, pa.types.is_large_binary, pa.types.is_large_list)


class NoPlan(ValueError):
    """A message type the native pass does not read (the caller decodes another way)."""


def available() -> bool:
    return core is not None


def plan(desc: Descriptor, target: pa.StructType) -> Plan:
    """The pass's plan for messages of ``desc`` into ``target`` (the table's value
    columns)."""
    count = [0]
    out = _message(desc, target, 0, 0, count)
    if count[0] > MAX_NODES:
        raise NoPlan(f"more than {MAX_NODES} Protobuf columns")
    return out


def _proto3(desc: Descriptor) -> bool:
    proto = descriptor_pb2.FileDescriptorProto()
    desc.file.CopyToProto(proto)
    return bool(proto.syntax == "proto3")


def _message(desc: Descriptor, arrow: pa.DataType, number: int, presence: int,
             count: list[int]) -> Plan:
    count[0] += 1
    if not pa.types.is_struct(arrow) or not _proto3(desc):
        raise NoPlan(f"{desc.full_name} is not a proto3 message as a struct")
    if arrow.num_fields > MAX_FIELDS:
        raise NoPlan(f"a message of more than {MAX_FIELDS} columns")
    by_name = {f.name: f for f in desc.fields}
    if not set(by_name) <= {arrow.field(i).name for i in range(arrow.num_fields)}:
        raise NoPlan("a field the table lacks")
    children: list[Plan] = []
    for i in range(arrow.num_fields):
        f = by_name.get(arrow.field(i).name)
        if f is None:
            count[0] += 1
            children.append((ABSENT, 0, 1, 0, (), ()))
        else:
            children.append(_field(f, arrow.field(i).type, count))
    return (STRUCT, number, presence, 0, tuple(children), ())


def _field(f: FieldDescriptor, arrow: pa.DataType, count: list[int]) -> Plan:
    oneof = f.containing_oneof
    if oneof is not None and len(oneof.fields) > 1:
        raise NoPlan(f"{f.full_name} is in a oneof")
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        raise NoPlan(f"{f.full_name} is a map")
    if _repeated(f):
        if not (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
            raise NoPlan(f"{f.full_name} is not a list column")
        count[0] += 1
        item = _single(f, arrow.value_type, 0, 0, count)
        return (LIST, f.number, 0, int(pa.types.is_large_list(arrow)), (item,), ())
    return _single(f, arrow, f.number, int(bool(f.has_presence)), count)


def _single(f: FieldDescriptor, arrow: pa.DataType, number: int, presence: int,
            count: list[int]) -> Plan:
    if f.type == _FD.TYPE_MESSAGE:
        if f.message_type.full_name == "google.protobuf.Timestamp":
            if not (pa.types.is_timestamp(arrow) and arrow.unit == "us"):
                raise NoPlan(f"{f.full_name} is not a microsecond timestamp column")
            count[0] += 1
            return (TS, number, 1, 0, (), ())
        return _message(f.message_type, arrow, number, 1, count)
    found = _SCALARS.get(f.type)
    if found is None or not found[1](arrow):
        raise NoPlan(f"no native column for {f.full_name} as {arrow}")
    count[0] += 1
    symbols: tuple[tuple[int, bytes], ...] = ()
    if f.type == _FD.TYPE_ENUM:
        symbols = tuple((number, v.name.encode())  # the reference's lookup (aliases too)
                        for number, v in f.enum_type.values_by_number.items())
    large = int(any(is_large(arrow) for is_large in _LARGE))
    return (found[0], number, presence, large, (), symbols)


def _repeated(f: FieldDescriptor) -> bool:
    repeated = getattr(f, "is_repeated", None)  # protobuf >= 5.28 (``label`` is gone in 7)
    return bool(repeated) if repeated is not None else f.label == _FD.LABEL_REPEATED


def decode(payloads: pa.Array, target: pa.StructType, node: Plan, reference: Reference
           ) -> tuple[pa.Array, dict[int, str]]:
    """``payloads`` (none null) as a struct array of ``target`` and the reasons of the rows
    with none, the values the pass rejects decoded by ``reference`` (the record-by-record
    decode_column)."""
    assert core is not None
    values = payloads.cast(pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + len(values) + 1]
    cols, rejected = core.proto_columns(values.buffers()[2] or b"", offsets, node)
    struct = column_array(target, node, cols, [0], _KINDS)
    if not rejected:
        return struct, {}
    again, bad = reference(values.take(pa.array(rejected, pa.int64())))
    n = len(struct)
    order = np.arange(n, dtype=np.int64)
    order[rejected] = n + np.arange(len(rejected))
    merged = pa.concat_arrays([struct, again.cast(target)]).take(pa.array(order))
    return merged, {rejected[i]: reason for i, reason in bad.items()}
