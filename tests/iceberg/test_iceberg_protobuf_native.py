"""The native core's strict Protobuf pass (iceberg/protobuf_native.py) gives the rows and DLQ
reasons of the reference (the protobuf runtime, value by value) for every type it reads, on
values the runtime writes and on those values with bytes flipped, set, inserted, deleted or
cut; a type it has no plan for (a map) goes to ptars as before."""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_iceberg_protobuf_bulk import _EDIT, _ORDER, PROTO, _message, _mutated, _no_refs

from tidelog.iceberg import protobuf_native
from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.native_arrays import column_array
from tidelog.iceberg.protobuf_values import ProtobufCodec
from tidelog.iceberg.schemas import codec_of
from tidelog.iceberg.value_codec import ValueCodec
from tidelog.schema_registry.schema_types import parse_schema

pytest.importorskip("grpc_tools")  # protoc, for the .proto text

NO_MAPS = PROTO.replace("map<string, int64> counts = 4;", "").replace(
    "map<int32, Line> by_id = 22;", "")
_VALUES = _ORDER.map(lambda o: {k: v for k, v in o.items() if k not in ("counts", "by_id")})


@pytest.fixture(autouse=True)
def _native_core() -> None:
    if not protobuf_native.available():
        if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it
            pytest.fail("the native core is not built")
        pytest.skip("the native core is not built (or TIDELOG_PURE_PYTHON is set)")


def _codec(text: str = NO_MAPS) -> ProtobufCodec:
    codec = codec_of(parse_schema("PROTOBUF", text, [], _no_refs), [0])
    assert isinstance(codec, ProtobufCodec)
    return codec


def _target(codec: ProtobufCodec) -> pa.StructType:
    return pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])


def _rows(array: pa.Array) -> str:
    return repr(array.to_pylist())  # NaN equal to NaN


CODEC = _codec()
TARGET = _target(CODEC)


def test_every_type_but_maps_has_a_plan() -> None:
    assert CODEC._native_plan(TARGET) is not None
    with_maps = _codec(PROTO)
    assert with_maps._native_plan(_target(with_maps)) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_VALUES, st.lists(_EDIT, max_size=3)), min_size=1, max_size=10))
def test_the_native_pass_equals_the_reference(
        cases: list[tuple[dict[str, Any], list[tuple[str, int, int]]]]) -> None:
    clean = [_message(CODEC._cls, o) for o, _ in cases]
    values = [_mutated(v, e) for v, (_, e) in zip(clean, cases, strict=True)]
    for batch in (clean, values):
        payloads = pa.array(batch, pa.binary())
        want, want_bad = ValueCodec.decode_column(CODEC, payloads, TARGET)
        got, bad = CODEC.decode_column(payloads, TARGET)
        assert bad == want_bad
        assert _rows(got) == _rows(want)
    node = CODEC._native_plan(TARGET)
    assert node is not None
    written = pa.array(clean, pa.binary())
    _, rejected = protobuf_native.core.proto_columns(  # type: ignore[union-attr]
        written.buffers()[2] or b"", written.buffers()[1], node)
    for i in rejected:  # what the runtime writes is taken, but a float NaN
        assert cases[i][0].get("fl", 0) != cases[i][0].get("fl", 0)


@pytest.mark.parametrize(("value", "taken"), [
    (b"", True),  # every field its default
    (b"\x08\x01\x08\x02", False),  # id sent twice (the runtime keeps the last)
    (b"\x1a\x02\x01\x02\x18\x03", True),  # sizes packed, then one more unpacked
    (b"\x28\x07", True),  # status 7: a number the enum does not name
    (b"\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", True),  # status -1 (10 bytes)
    (b"\x3a\x07\x08\x80\xf0\x92\xcb\xdd\x08", False),  # at in year 11476: out of range
    (b"\x3a\x06\x08\x80\xe0\xd3\xe8\xa8", False),  # at cut short
    (b"\x3a\x04\x10\xff\xff\x03", True),  # at: nanos only
    (b"\x32\x00\x32\x00", False),  # line sent twice (the runtime merges)
    (b"\x48\x00", True),  # maybe (optional) 0: not null
    (b"\x92\x01\x00", False),  # fl (float) length-delimited: the runtime keeps it unknown
])
def test_the_strict_rules(value: bytes, taken: bool) -> None:
    node = CODEC._native_plan(TARGET)
    assert node is not None
    array = pa.array([value], pa.binary())
    _, rejected = protobuf_native.core.proto_columns(  # type: ignore[union-attr]
        array.buffers()[2] or b"", array.buffers()[1], node)
    assert (rejected == []) is taken
    want, want_bad = ValueCodec.decode_column(CODEC, array, TARGET)
    got, bad = CODEC.decode_column(array, TARGET)
    assert bad == want_bad and _rows(got) == _rows(want)


def test_a_table_column_the_message_lacks_is_null() -> None:
    wider = _codec(NO_MAPS.replace("message Line", "int64 extra = 30; message Line"))
    target = _target(wider)
    assert CODEC._native_plan(target) is not None
    got, bad = CODEC.decode_column(pa.array([CODEC._cls(id=4).SerializeToString()]), target)
    assert not bad and got.to_pylist()[0]["extra"] is None and got.to_pylist()[0]["id"] == 4


def test_the_pass_hands_its_buffers_over_without_a_copy() -> None:
    """Its columns' buffers are the pass's own memory (read-only objects, not bytes copied
    from it), read in place by the arrays built on them, and valid after the pass's result
    is dropped."""
    orders = [{"id": i - 20, "name": f"n{i}"} for i in range(40)]
    array = pa.array([_message(CODEC._cls, o) for o in orders], pa.binary())
    node = CODEC._native_plan(TARGET)
    assert node is not None and protobuf_native.core is not None
    cols, rejected = protobuf_native.core.proto_columns(
        array.buffers()[2], array.buffers()[1], node)
    assert not rejected
    ids, names = cols[1], cols[2]  # preorder: the message, then id, name
    for buf in (ids[1], ids[2], names[2], names[3]):
        assert not isinstance(buf, bytes) and memoryview(buf).readonly
    assert len(memoryview(ids[2])) == 8 * 40
    struct = column_array(TARGET, node, cols, [0], protobuf_native._KINDS)
    assert struct.field("id").buffers()[1].address == np.frombuffer(
        ids[2], np.uint8).ctypes.data
    for at, buf in ((1, names[3]), (2, names[2])):  # the offsets, then the text
        assert struct.field("name").buffers()[at].address == np.frombuffer(
            buf, np.uint8).ctypes.data
    del cols, ids, names
    gc.collect()
    assert struct.field("id").to_pylist() == [i - 20 for i in range(40)]
    assert struct.field("name").to_pylist() == [f"n{i}" for i in range(40)]
