"""Protobuf values decoded in bulk (ptars, checked by one parse of the protobuf runtime) give
the rows the one-by-one path (the runtime, message by message) gives, for every type the
translator maps; a bad value among many is found alone; values of several schema ids and
message indexes are sorted into their codecs' groups."""

from __future__ import annotations

import datetime
import importlib
import math
import os
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema

from tidelog.iceberg import protobuf_bulk
from tidelog.iceberg.columns import arrow_schema, table_schema
from tidelog.iceberg.protobuf_bulk import length_delimited, wire_plan
from tidelog.iceberg.protobuf_values import ProtobufCodec
from tidelog.iceberg.rows import RecordSorter, batch_of, table_rows
from tidelog.iceberg.schemas import Codecs, codec_of
from tidelog.iceberg.value_codec import ValueCodec, strip_prefix, strip_prefix_py
from tidelog.records import Record
from tidelog.schema_registry.records import SchemaValue
from tidelog.schema_registry.schema_types import ParsedSchema, parse_schema

pytest.importorskip("grpc_tools")  # protoc, for the .proto text below

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1; string name = 2; repeated int32 sizes = 3; map<string, int64> counts = 4;
  Status status = 5; Line line = 6; google.protobuf.Timestamp at = 7; uint64 big = 8;
  optional int32 maybe = 9; sint32 s32 = 10; sint64 s64 = 11; fixed32 f32 = 12;
  fixed64 f64 = 13; sfixed32 sf32 = 14; sfixed64 sf64 = 15; uint32 u32 = 16; bool b = 17;
  float fl = 18; double d = 19; bytes raw = 20; repeated Line lines = 21;
  map<int32, Line> by_id = 22; repeated Status statuses = 23;
  repeated google.protobuf.Timestamp ats = 24; optional string maybe_name = 25;
  message Line { string sku = 1; Status st = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
message Other { bool flag = 1; string label = 2; }
"""

_I32, _I64 = st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1)
_U32, _U64 = st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)
_ENUM = st.integers(-3, 5)  # NEW, PAID and numbers the enum does not name
_TEXT = st.text(max_size=8)
_SECONDS = st.integers(-62_135_596_800, 253_402_300_799)  # 0001-01-01 .. 9999-12-31
_TS = st.tuples(_SECONDS, st.integers(0, 999_999_999))
_LINE = st.fixed_dictionaries({"sku": _TEXT, "st": _ENUM})


def _codec(index: int = 0) -> ProtobufCodec:
    parsed: ParsedSchema = parse_schema("PROTOBUF", PROTO, [], _no_refs)
    codec = codec_of(parsed, [index])
    assert isinstance(codec, ProtobufCodec)
    return codec


def _no_refs(ref: object) -> SchemaValue:
    raise AssertionError("no references here")


def _target(codec: ValueCodec) -> pa.StructType:
    return pa.struct(list(arrow_schema(Schema(*codec.fields))))


_ORDER = st.fixed_dictionaries({}, optional={
    "id": _I64, "name": _TEXT, "sizes": st.lists(_I32, max_size=3),
    "counts": st.dictionaries(_TEXT, _I64, max_size=3), "status": _ENUM, "line": _LINE,
    "at": _TS, "big": _U64, "maybe": _I32, "s32": _I32, "s64": _I64, "f32": _U32,
    "f64": _U64, "sf32": _I32, "sf64": _I64, "u32": _U32, "b": st.booleans(),
    "fl": st.floats(width=32, allow_nan=False), "d": st.floats(allow_nan=False),
    "raw": st.binary(max_size=8), "lines": st.lists(_LINE, max_size=2),
    "by_id": st.dictionaries(_I32, _LINE, max_size=2),
    "statuses": st.lists(_ENUM, max_size=3), "ats": st.lists(_TS, max_size=2),
    "maybe_name": _TEXT})


def _message(cls: Any, fields: dict[str, Any]) -> bytes:
    m = cls()
    for name, v in fields.items():
        if name in ("line",):
            getattr(m, name).sku, getattr(m, name).st = v["sku"], v["st"]
        elif name == "at":
            m.at.seconds, m.at.nanos = v
        elif name == "lines":
            for line in v:
                m.lines.add(sku=line["sku"], st=line["st"])
        elif name == "by_id":
            for k, line in v.items():
                m.by_id[k].sku, m.by_id[k].st = line["sku"], line["st"]
        elif name == "ats":
            for s, n in v:
                m.ats.add(seconds=s, nanos=n)
        elif name in ("sizes", "statuses"):
            getattr(m, name).extend(v)
        elif name == "counts":
            m.counts.update(v)
        else:
            setattr(m, name, v)
    out: bytes = m.SerializeToString()
    return out


CODEC = _codec()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ORDER, min_size=1, max_size=12))
def test_bulk_equals_one_by_one_for_every_type(orders: list[dict[str, Any]]) -> None:
    codec = _codec()
    payloads = pa.array([_message(codec._cls, o) for o in orders], pa.binary())
    target = _target(codec)
    one, one_bad = ValueCodec.decode_column(codec, payloads, target)
    bulk, bad = codec.decode_column(payloads, target)
    assert one_bad == {} and bad == {}
    assert codec._bulk is not None  # the bulk path took them: nothing fell back
    assert _maps_as_dicts(bulk.to_pylist()) == _maps_as_dicts(one.to_pylist())


def _maps_as_dicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Protobuf maps have no order (the runtime's differs from the wire's)."""
    return [{**r, "counts": dict(r["counts"]), "by_id": dict(r["by_id"])} for r in rows]


def test_types_read_in_bulk() -> None:
    codec = _codec()
    m = codec._cls(id=9, big=2**64 - 1, f64=2**63, u32=2**32 - 1, status=1, maybe=0)
    m.statuses.extend([0, 1, 7])
    m.at.seconds, m.at.nanos = 1_700_000_000, 123_456_789
    m.by_id[3].sku = "y"
    empty = codec._cls()
    row, none = codec.decode_column(
        pa.array([m.SerializeToString(), empty.SerializeToString()]), _target(codec))[0
                                                                                        ].to_pylist()
    assert codec._bulk is not None
    assert row["big"] == -1 and row["f64"] == -2**63 and row["u32"] == 2**32 - 1
    assert row["status"] == "PAID" and row["statuses"] == ["NEW", "PAID", "7"]
    assert row["at"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, datetime.UTC)
    assert row["maybe"] == 0 and none["maybe"] is None and none["line"] is None
    assert row["by_id"] == [(3, {"sku": "y", "st": "NEW"})] and none["id"] == 0


def test_the_framing_is_the_runtimes_repeated_field() -> None:
    lengths = [0, 1, 127, 128, 300, 16_384, 70_000]
    values = [bytes([i % 251]) * n for i, n in enumerate(lengths)]
    from google.protobuf.internal.encoder import _VarintBytes

    want = b"".join(b"\x0a" + _VarintBytes(len(v)) + v for v in values)
    sliced = pa.array([b"x", *values], pa.binary()).slice(1)
    assert length_delimited(sliced).tobytes() == want
    assert length_delimited(pa.array([], pa.binary())).tobytes() == b""


@pytest.mark.parametrize("bad", [
    b"\xff\xff",  # a varint cut short
    b"\x12\x05ab",  # a string longer than the bytes left
    b"\x08\x01\x73",  # a group that never ends (ptars reads past it; the runtime refuses)
    b"\x12\x02\xff\xfe",  # a proto3 string that is not UTF-8
])
def test_a_bad_value_among_many_is_found_alone(bad: bytes) -> None:
    codec = _codec()
    good = [codec._cls(id=i, name=f"n{i}").SerializeToString() for i in range(50)]
    payloads = pa.array([*good[:20], bad, *good[20:]], pa.binary())
    values, found = codec.decode_column(payloads, _target(codec))
    assert list(found) == [20] and "does not parse" in found[20]
    rows = values.to_pylist()
    assert rows[20] is None
    assert [r["id"] for r in rows[:20] + rows[21:]] == list(range(50))
    assert codec._bulk is not None  # one bad value does not turn the bulk path off
    again, none = codec.decode_column(pa.array(good, pa.binary()), _target(codec))
    assert none == {} and again.to_pylist() == rows[:20] + rows[21:]


class _Source:
    def __init__(self, values: dict[int, SchemaValue]) -> None:
        self.values = values

    def may_lag(self, schema_id: int) -> bool:
        return False

    def by_id(self, schema_id: int) -> SchemaValue | None:
        return self.values.get(schema_id)

    def latest(self, subject: str) -> SchemaValue | None:
        return None

    def parse(self, value: SchemaValue) -> ParsedSchema:
        return parse_schema(value.schema_type, value.schema, value.references, _no_refs)


def _framed(schema_id: int, indexes: bytes, payload: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + indexes + payload


def test_mixed_schema_ids_and_message_indexes() -> None:
    """Two Protobuf schema ids, the first message (indexes as the byte 0 and as [0]) and
    the second ([1]: zig-zag count 1, index 1), a value with no indexes at all, and bad
    bytes: each value is decoded by its own message type, in the records' order."""
    proto2 = PROTO.replace("package shop;", "package shop2;")
    source = _Source({3: SchemaValue("t-value", 1, 3, PROTO, "PROTOBUF"),
                      4: SchemaValue("t-value", 2, 4, proto2, "PROTOBUF")})
    codecs = Codecs(source)
    order, other = CODEC._cls, _codec(1)._cls
    values = [
        _framed(3, b"\x00", order(id=1, name="a").SerializeToString()),
        _framed(4, b"\x00", order(id=2).SerializeToString()),
        _framed(3, b"\x02\x02", other(flag=True, label="o").SerializeToString()),
        _framed(3, b"\x02\x00", order(id=4).SerializeToString()),
        _framed(3, b"", b""),  # no message indexes
        _framed(4, b"\x00", b"\xff"),  # does not parse
        _framed(3, b"\x00", order(id=7, status=1).SerializeToString()),
    ]
    records = [Record(i, 0, None, v, []) for i, v in enumerate(values)]
    got = RecordSorter("t", "value_schema_id_prefix", codecs).sort(
        0, batch_of(records), 0, len(records))
    assert sorted(g.rows.tolist() for g in got.groups) == [[0, 6], [1, 5], [2], [3]]
    assert "message index" in got.dlq[4]
    fields = [*_codec(0).fields]
    names = {f.name for f in fields}
    fields += [f for f in _codec(1).fields if f.name not in names]
    schema = table_schema(fields)
    rows = table_rows(got, schema).to_pylist()
    assert "does not parse" in got.dlq[5]
    assert [(r["kafka"]["offset"], r["id"], r["flag"], r["status"]) for r in rows] == [
        (0, 1, None, "NEW"), (1, 2, None, "NEW"), (2, None, True, None), (3, 4, None, "NEW"),
        (6, 7, None, "PAID")]


def test_first_message_reads_no_byte_past_a_short_value() -> None:
    from tidelog.iceberg.rows import first_message

    values = pa.array([b"\x00\x00\x00\x00\x03", b"\x00\x00\x00\x00\x03\x00", b"\x00" * 5 +
                       b"\x02\x02", b"\x00\x00\x00\x00\x03\x00abc"], pa.binary()).slice(0)
    assert first_message(values).tolist() == [False, True, False, True]
    assert np.asarray(first_message(values.slice(2))).tolist() == [False, True]


def test_values_the_runtime_rows_differ_on_are_decoded_one_by_one() -> None:
    """A Timestamp past year 9999 (the one-by-one path refuses it) and a map key sent
    twice (the runtime keeps the last): the bulk columns would differ, so those values are
    decoded one by one, and the bulk path stays on for the next values."""
    codec = _codec()
    late = codec._cls()
    late.at.seconds = 300_000_000_000  # year 11476
    twice = b"\x22\x05\x0a\x01a\x10\x01" + b"\x22\x05\x0a\x01a\x10\x02"
    good = [codec._cls(id=i).SerializeToString() for i in range(5)]
    values, bad = codec.decode_column(
        pa.array([*good, late.SerializeToString(), twice], pa.binary()), _target(codec))
    assert list(bad) == [5] and "out of range" in bad[5]
    rows = values.to_pylist()
    assert rows[6]["counts"] == [("a", 2)] and [r["id"] for r in rows[:5]] == list(range(5))
    assert codec._bulk is not None
    alone, none = codec.decode_column(pa.array([twice], pa.binary()), _target(codec))
    assert none == {} and alone.to_pylist()[0]["counts"] == [("a", 2)]
    assert codec._bulk is not None  # every value parsed alone, yet the bulk path stays on


# --- the native walk of the wire format (proto_wire.c) against the runtime's parse ---

try:  # the compiled module itself: its tests run under TIDELOG_PURE_PYTHON=1 too
    core: Any = importlib.import_module("tidelog._native._core")
except ImportError:
    core = None


def _needs_core() -> None:
    if core is None:
        if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it
            pytest.fail("the native core is not built")
        pytest.skip("the native core is not built")


_EDIT = st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "cut"]),
                  st.integers(0, 10_000), st.integers(0, 255))


def _mutated(value: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    b = bytearray(value)
    for op, at, byte in edits:
        i = at % (len(b) + 1)
        if op == "insert":
            b[i:i] = bytes([byte])
        elif op == "cut":
            del b[i:]
        elif i < len(b):
            if op == "flip":
                b[i] ^= 1 << (byte % 8)
            elif op == "set":
                b[i] = byte
            else:
                del b[i]
    return bytes(b)


def _runtime_refuses(codec: ProtobufCodec, value: bytes) -> bool:
    try:
        codec._cls.FromString(value)
    except DecodeError:
        return True
    return False


def _walk(codec: ProtobufCodec, values: list[bytes]) -> list[int]:
    assert core is not None and codec._bulk is not None and codec._bulk.plan is not None
    array = pa.array(values, pa.binary())
    offsets = np.frombuffer(array.buffers()[1], np.int32)[: len(values) + 1]
    refused: list[int] = core.proto_check(array.buffers()[2] or b"", offsets,
                                          codec._bulk.plan)
    return refused


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_ORDER, st.lists(_EDIT, max_size=3)), min_size=1, max_size=8))
def test_the_native_walk_refuses_what_the_runtime_refuses(
        cases: list[tuple[dict[str, Any], list[tuple[str, int, int]]]]) -> None:
    """Valid messages from the runtime, then bytes flipped, set, inserted, deleted or cut:
    every value the runtime refuses, the native walk refuses (it may refuse more: those the
    runtime decodes value by value); a value not edited is never refused. The flush's
    decode then gives the reference's rows and reasons, whichever refused."""
    _needs_core()
    codec = CODEC
    clean = [_message(codec._cls, o) for o, _ in cases]
    values = [_mutated(v, edits) for v, (_, edits) in zip(clean, cases, strict=True)]
    refused = set(_walk(codec, values))
    assert _walk(codec, clean) == []
    for i, value in enumerate(values):
        if _runtime_refuses(codec, value):
            assert i in refused, value.hex()
    target = _target(codec)
    payloads = pa.array(values, pa.binary())
    want, want_bad = ValueCodec.decode_column(codec, payloads, target)
    got, bad = codec.decode_column(payloads, target)
    assert bad == want_bad
    assert _maps_as_dicts_or_none(got.to_pylist()) == _maps_as_dicts_or_none(want.to_pylist())


def _maps_as_dicts_or_none(rows: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    return [None if r is None else _nan_marked(_maps_as_dicts([r])[0]) for r in rows]


def _nan_marked(v: Any) -> Any:
    """``v`` with each float NaN (an edited float's bits may be one) as a marker that equals
    itself, so that equal rows compare equal."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: _nan_marked(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_nan_marked(x) for x in v]
    return v


@pytest.mark.parametrize(("value", "runtime", "walk"), [
    (b"\x08" + b"\xff" * 10 + b"\x01", True, True),  # a varint of 11 bytes
    (b"\x08" + b"\xff" * 9 + b"\x02", False, True),  # a 10th byte past 2^64 (the runtime
    # drops the bits)
    (b"\x00\x01", True, True),  # field number 0
    (b"\x0e\x01", True, True),  # wire type 6
    (b"\x0f\x01", True, True),  # wire type 7
    (b"\x0c", True, True),  # an end-group with no group
    (b"\xfb\x07\xfc\x07", False, True),  # an unknown, well-formed group (the runtime
    # skips it)
    (b"\x12\x02\xc0\x80", True, True),  # an overlong NUL in a proto3 string
    (b"\x12\x03\xed\xa0\x80", True, True),  # a surrogate in a proto3 string
    (b"\x12\x04\xf4\x90\x80\x80", True, True),  # past U+10FFFF
    (b"\x12\x03\xe2\x82", True, True),  # a length past the end
    (b"\x12\x02\xe2\x82", True, True),  # a character cut by the string's end
    (b"\x1a\x02\x01\xff", True, True),  # packed int32 ending inside a varint
    (b"\x1a\x02\x01\x02", False, False),  # packed int32, two elements
    (b"\x18\x01\x18\x02", False, False),  # the same unpacked
    (b"\x62\x03\x01\x02\x03", False, True),  # fixed32 (singular) length-delimited (the
    # runtime keeps it as an unknown field)
    (b"\x0a\x01\x01", False, True),  # id (int64) length-delimited, the same
    (b"\x08\x80\x80\x80\x80\x10", False, False),  # int64 as a 6-byte varint
    (b"\x12\x01\x01", False, False),  # a string of one control character
    (b"\xa8\x1f\x01", False, False),  # an unknown varint field (number 501)
    (b"\x32\x02\x10\x80", True, True),  # line.st (enum) cut, one message down
    (b"\x32\x03\x0a\x01\x80", True, True),  # line.sku not UTF-8, one message down
    (b"\x22\x04\x0a\x02\xc3\x28", True, True),  # a map key that is not UTF-8
    (b"\x3a\x02\x08\x80", True, True),  # at.seconds cut short, in a Timestamp
    (b"\x22\x07\x1a\x01\x30\x10\x80\x80\x01", False, True),  # a map entry with an
    # unknown field 3 (the runtime leaves the entry out of the map)
    (b"\x22\x05\x0a\x01\x30\x10\x01", False, False),  # the same entry, known fields only
])
def test_the_native_walk_on_edge_cases(value: bytes, runtime: bool, walk: bool) -> None:
    _needs_core()
    assert _runtime_refuses(CODEC, value) is runtime
    assert _walk(CODEC, [CODEC._cls(id=1).SerializeToString(), value]) == ([1] if walk else [])


def test_values_only_the_native_walk_refuses_are_the_runtimes() -> None:
    """Refused by the walk, taken by the runtime: decoded value by value, no DLQ entry."""
    _needs_core()
    codec = _codec()
    odd = b"\x08\x05\xfb\x07\xfc\x07"  # id 5, then an unknown group the runtime skips
    good = [codec._cls(id=i).SerializeToString() for i in range(3)]
    values, bad = codec.decode_column(pa.array([*good, odd], pa.binary()), _target(codec))
    assert bad == {} and [r["id"] for r in values.to_pylist()] == [0, 1, 2, 5]
    assert codec._bulk is not None


def test_a_map_entry_with_an_unknown_field_is_the_runtimes() -> None:
    """The runtime leaves a map entry with a field other than key and value out of the map
    (ptars would read it as an entry with the default key): the walk refuses the value, so
    the runtime decodes it."""
    _needs_core()
    codec = _codec()
    odd = bytes.fromhex("22071a013010808001")  # counts: one entry, its key under number 3
    values, bad = codec.decode_column(pa.array([odd], pa.binary()), _target(codec))
    want, _ = ValueCodec.decode_column(codec, pa.array([odd], pa.binary()), _target(codec))
    assert bad == {} and values.to_pylist()[0]["counts"] == [] == want.to_pylist()[0]["counts"]


def test_a_group_field_is_checked_by_the_runtime() -> None:
    """A message type with a group field has no plan: the runtime's parse checks it."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="g.proto", package="g", syntax="proto2")
    m = fdp.message_type.add(name="M")
    m.nested_type.add(name="G").field.add(name="x", number=2, type=f.TYPE_INT32,
                                          label=f.LABEL_OPTIONAL)
    m.field.add(name="g", number=1, type=f.TYPE_GROUP, label=f.LABEL_OPTIONAL,
                type_name=".g.M.G")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("g.M")
    assert wire_plan(desc) is None
    assert wire_plan(CODEC._cls.DESCRIPTOR) is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=6, max_size=20), max_size=20), st.integers(0, 6),
       st.integers(0, 3))
def test_strip_prefix_twins(values: list[bytes], skip: int, cut: int) -> None:
    array = pa.array([b"......", *values], pa.binary()).slice(min(cut, len(values)))
    want = strip_prefix_py(array, skip)
    assert want.to_pylist() == [v[skip:] for v in array.to_pylist()]
    assert strip_prefix(array, skip).equals(want)  # the native copy where it is built


def test_values_the_walk_refuses_are_decoded_alone_the_others_in_bulk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two bad values among 40: the bulk decode runs again over the 38 others (not the
    runtime, value by value, over all 40), and the rows and reasons are the reference's."""
    _needs_core()
    if not protobuf_bulk.core:
        pytest.skip("TIDELOG_PURE_PYTHON is set: the runtime checks the values")
    codec = _codec()
    assert codec._bulk is not None
    sizes: list[int] = []
    decode = codec._bulk.decode

    def counted(payloads: pa.Array, target: pa.StructType) -> pa.Array:
        sizes.append(len(payloads))
        return decode(payloads, target)

    monkeypatch.setattr(codec._bulk, "decode", counted)
    values = [codec._cls(id=i, name=f"n{i}").SerializeToString() for i in range(40)]
    values[3], values[30] = b"\x12\x02\xff\xfe", b"\x08\x05\xfb\x07\xfc\x07"  # bad; odd
    payloads = pa.array(values, pa.binary())
    want, want_bad = ValueCodec.decode_column(codec, payloads, _target(codec))
    got, bad = codec.decode_column(payloads, _target(codec))
    assert sizes == [40, 38]
    assert list(bad) == [3] and bad == want_bad
    assert got.to_pylist() == want.to_pylist() and got.to_pylist()[30]["id"] == 5
