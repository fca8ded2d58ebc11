"""Many Protobuf values of one message type decoded in one call: ptars (Rust) turns the
serialized messages, an Arrow binary array, into Arrow columns (enums as their names,
Timestamps as microseconds in UTC), which are cast to the table's columns (uint64/fixed64
wrap to long, as the one-by-one path does). The protobuf runtime (``decode`` in
protobuf_values, one value at a time) is the reference and the fallback.

ptars takes some malformed wire data that the runtime refuses (a stray group tag), so the
values are checked first (``check_wire``): by the native core's walk of the wire format
against the message type (``wire_plan``), which refuses what the runtime refuses and a few
things more, or, without the native core, by the runtime itself (``check_wire_py``), which
parses them all in one call: laid end to end as field 1 of a wrapper message (``repeated
<the message> values = 1``, Protobuf's own framing: a tag and a length before each value).
A value the runtime refuses fails the bulk decode; the caller then decodes the values one
by one, which finds the bad ones. The native walk names the values it refuses: the caller
decodes those one by one (taking the few only the walk refused) and the others in bulk."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from ptars import HandlerPool, PtarsConfig

from .._native import core

_CONFIG = PtarsConfig(enum_repr="string", timestamp_unit="us", timestamp_tz="UTC",
                      list_value_nullable=True, map_value_nullable=True)
_WRAPPER = "TidelogValues"


def wrapper_class(desc: Descriptor) -> type[Message]:
    """``message TidelogValues { repeated <desc> values = 1; }``, in ``desc``'s pool."""
    f = descriptor_pb2.FieldDescriptorProto
    package = f"tidelog.bulk.{desc.full_name}".lower()
    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"{package.replace('.', '/')}.proto", package=package,
        dependency=[desc.file.name], syntax="proto3")
    m = fdp.message_type.add(name=_WRAPPER)
    m.field.add(name="values", number=1, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                type_name=f".{desc.full_name}")
    pool = desc.file.pool
    try:
        found = pool.FindMessageTypeByName(f"{package}.{_WRAPPER}")
    except KeyError:
        pool.Add(fdp)
        found = pool.FindMessageTypeByName(f"{package}.{_WRAPPER}")
    cls: type[Message] = message_factory.GetMessageClass(found)
    return cls


def length_delimited(payloads: pa.BinaryArray) -> np.ndarray:
    """The payloads as the repeated field 1 of a message: each after the byte 0x0a (field
    1, length-delimited) and its length as a varint; one scatter over the data buffer."""
    n = len(payloads)
    offsets = np.frombuffer(payloads.buffers()[1], np.int32)[
        payloads.offset: payloads.offset + n + 1].astype(np.int64)
    data = np.frombuffer(payloads.buffers()[2] or b"", np.uint8)[offsets[0]: offsets[-1]]
    lengths = np.diff(offsets)
    digits = np.ones(n, dtype=np.int64)  # varint bytes of each length (< 2^31: at most 5)
    for k in range(1, 5):
        digits += lengths >= (1 << (7 * k))
    starts = np.zeros(n, dtype=np.int64)  # where each value's tag goes
    np.cumsum((1 + digits + lengths)[:-1], out=starts[1:])
    out = np.empty(int(len(data) + n + digits.sum()), dtype=np.uint8)
    is_data = np.ones(len(out), dtype=bool)
    out[starts] = 0x0A
    is_data[starts] = False
    for k in range(5):
        has = np.flatnonzero(digits > k)
        at = starts[has] + 1 + k
        more = (digits[has] > k + 1) * 0x80
        out[at] = ((lengths[has] >> (7 * k)) & 0x7F) | more
        is_data[at] = False
    out[is_data] = data
    return out


class BulkDecoder:
    """The values of one message type, many at a time."""

    def __init__(self, desc: Descriptor) -> None:
        if not desc.fields:
            raise ValueError("a message without fields has no columns to read in bulk")
        self._handler = HandlerPool([desc.file], config=_CONFIG).get_for_message(desc)
        self._wrapper = wrapper_class(desc)
        self.plan = wire_plan(desc)

    def decode(self, payloads: pa.Array, target: pa.StructType) -> pa.Array:
        """The payloads as a struct array of ``target``; raises when one does not parse
        (the caller then decodes value by value)."""
        if payloads.null_count:
            raise ValueError("a null payload")
        payloads = payloads.cast(pa.binary())
        check_wire(self, payloads)
        batch = self._handler.array_to_record_batch(payloads)
        if batch.num_rows != len(payloads):
            raise ValueError(f"{batch.num_rows} rows read from {len(payloads)} values")
        struct = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
        check(struct)
        return struct.cast(target, safe=False)


def check_wire(decoder: BulkDecoder, payloads: pa.BinaryArray) -> None:
    """Raises RowsDiffer when a value's wire data is refused: by the native walk (a superset
    of what the runtime refuses), else by the runtime (``check_wire_py``)."""
    if core is None or decoder.plan is None:
        return check_wire_py(decoder, payloads)
    n = len(payloads)
    offsets = np.frombuffer(payloads.buffers()[1], np.int32)[
        payloads.offset: payloads.offset + n + 1]
    refused = core.proto_check(payloads.buffers()[2] or b"", offsets, decoder.plan)
    if refused:
        raise Refused(refused)
    return None


def check_wire_py(decoder: BulkDecoder, payloads: pa.BinaryArray) -> None:
    """``check_wire``'s twin and reference: the runtime parses the values in one call."""
    try:
        decoder._wrapper.FromString(length_delimited(payloads).data)
    except DecodeError as exc:  # a value that does not parse (or one nested one level
        raise RowsDiffer(f"a value does not parse: {exc}") from None  # too deep here)


_FD = FieldDescriptor
_WIRE_KINDS = {
    **dict.fromkeys((_FD.TYPE_INT32, _FD.TYPE_INT64, _FD.TYPE_UINT32, _FD.TYPE_UINT64,
                     _FD.TYPE_SINT32, _FD.TYPE_SINT64, _FD.TYPE_BOOL, _FD.TYPE_ENUM), 1),
    **dict.fromkeys((_FD.TYPE_FIXED64, _FD.TYPE_SFIXED64, _FD.TYPE_DOUBLE), 2),
    **dict.fromkeys((_FD.TYPE_FIXED32, _FD.TYPE_SFIXED32, _FD.TYPE_FLOAT), 3),
    _FD.TYPE_STRING: 4, _FD.TYPE_BYTES: 5, _FD.TYPE_MESSAGE: 6}
_MAX_MESSAGES = 1 << 16


_CLOSED = struct.pack("<IBBH", 0, 0, 0, 0)  # first entry of a map entry's message


def wire_plan(desc: Descriptor) -> tuple[bytes, ...] | None:
    """The message type as the native walk reads it (proto_wire.c): its messages, ``desc``
    first, each as 8-byte fields sorted by number (number, wire kind, repeated, index of
    the nested message); None for a type it does not walk (a group field). A map entry's
    message starts with an entry of number 0: the walk refuses any field it does not name
    there (the runtime leaves such an entry out of the map, which the bulk decoders would
    not)."""
    index: dict[str, int] = {}
    plans: list[bytes] = []

    def add(m: Descriptor) -> int | None:
        if m.full_name in index:
            return index[m.full_name]
        index[m.full_name] = len(plans)
        plans.append(b"")
        entries = [_CLOSED] if m.GetOptions().map_entry else []
        for f in sorted(m.fields, key=lambda f: f.number):
            kind = _WIRE_KINDS.get(f.type)
            sub = add(f.message_type) if kind == 6 else 0
            if kind is None or sub is None or sub >= _MAX_MESSAGES:
                return None
            entries.append(struct.pack("<IBBH", f.number, kind, _repeated(f), sub))
        plans[index[m.full_name]] = b"".join(entries)
        return index[m.full_name]

    return tuple(plans) if add(desc) is not None else None


def _repeated(f: FieldDescriptor) -> bool:
    repeated = getattr(f, "is_repeated", None)  # protobuf >= 5.28 (``label`` is gone in 7)
    return bool(repeated) if repeated is not None else f.label == _FD.LABEL_REPEATED


class RowsDiffer(ValueError):
    """Some values' columns would differ from the runtime's rows: decode them one by one
    (this time only: the next values may well be fine)."""


class Refused(RowsDiffer):
    """The native walk refused these values (row numbers): decode them one by one, the
    others in bulk."""

    def __init__(self, rows: list[int]) -> None:
        super().__init__(f"{len(rows)} values refused, the first at row {rows[0]}")
        self.rows = rows


_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999  # 0001 .. 9999 (UTC)


def check(array: pa.Array) -> None:
    """Raises where the columns hold what the runtime's rows would not: a Timestamp outside
    years 1-9999 (Timestamp's own range; the one-by-one path refuses it) or a map key twice
    in one value (the runtime keeps the last)."""
    if pa.types.is_timestamp(array.type):
        low, high = pc.min_max(array.cast(pa.int64())).values()
        if low.is_valid and (low.as_py() < _MIN_US or high.as_py() > _MAX_US):
            raise RowsDiffer("a Timestamp outside years 1 to 9999")
    elif pa.types.is_struct(array.type):
        for i in range(array.type.num_fields):
            check(array.field(i))
    elif pa.types.is_map(array.type):
        _unique_keys(array)
        check(array.keys)
        check(array.items)
    elif pa.types.is_list(array.type):
        check(array.values)


def _unique_keys(maps: pa.MapArray) -> None:
    offsets = maps.offsets.to_numpy()
    counts = np.diff(offsets)
    if not len(maps.keys) or counts.max() < 2:
        return
    owner = np.repeat(np.arange(len(maps)), counts)
    keys = maps.keys
    if len(keys) != offsets[-1] - offsets[0]:  # the keys of every map, not the slice's
        keys = keys.slice(offsets[0], offsets[-1] - offsets[0])
    pairs = pa.table({"owner": owner, "key": keys})
    if pairs.group_by(["owner", "key"]).aggregate([]).num_rows != pairs.num_rows:
        raise RowsDiffer("a map key twice in one value")
