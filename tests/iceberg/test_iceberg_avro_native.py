"""The native core's strict Avro pass (iceberg/avro_native.py) gives the rows and DLQ reasons
of the reference (fastavro, value by value) for every type it reads, on values fastavro
writes and on those values with bytes flipped, set, inserted, deleted or cut; what it has no
plan for goes to Polars' reader as before."""

from __future__ import annotations

import gc
import importlib
import io
import math
import os
import re
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_iceberg_protobuf_bulk import _EDIT, _mutated

from tidelog.iceberg import avro_native
from tidelog.iceberg.avro_values import AvroCodec
from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.native_arrays import column_array
from tidelog.iceberg.value_codec import ValueCodec

try:  # the compiled module itself: these tests need it whatever tidelog's switch says
    core: Any = importlib.import_module("tidelog._native._core")
except ImportError:
    core = None

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"}, {"name": "qty", "type": "int"},
        {"name": "ok", "type": "boolean"}, {"name": "ratio", "type": "float"},
        {"name": "price", "type": "double"}, {"name": "name", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B_2"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "D4", "size": 4}},
        {"name": "note", "type": ["null", "string"]},
        {"name": "late", "type": ["long", "null"]},
        {"name": "tags", "type": {"type": "array", "items": ["null", "string"]}},
        {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
            {"name": "city", "type": "string"}, {"name": "kind2", "type": "Kind"}]}]},
        {"name": "lines", "type": {"type": "array", "items": "Ship"}},
        {"name": "other", "type": "shop.D4"},
    ]}

_KINDS = st.sampled_from(["A", "B_2"])
_SHIP = st.fixed_dictionaries({"city": st.text(max_size=4), "kind2": _KINDS})
_VALUE = st.fixed_dictionaries({
    "id": st.integers(-2**63, 2**63 - 1), "qty": st.integers(-2**31, 2**31 - 1),
    "ok": st.booleans(), "ratio": st.floats(width=32), "price": st.floats(),
    "name": st.text(max_size=6), "raw": st.binary(max_size=6),
    "kind": _KINDS, "digest": st.binary(min_size=4, max_size=4),
    "note": st.none() | st.text(max_size=4), "late": st.none() | st.integers(-5, 5),
    "tags": st.lists(st.none() | st.text(max_size=3), max_size=3),
    "ship": st.none() | _SHIP, "lines": st.lists(_SHIP, max_size=2),
    "other": st.binary(min_size=4, max_size=4)})

@pytest.fixture(autouse=True)
def _native_core() -> None:
    if core is None or not avro_native.available():
        if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it
            pytest.fail("the native core is not built")
        pytest.skip("the native core is not built (or TIDELOG_PURE_PYTHON is set)")


def _write(schema: Any, value: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def _target(codec: AvroCodec) -> pa.StructType:
    return pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])


def _reasons(bad: dict[int, str]) -> dict[int, str]:
    """The reasons less the address of fastavro's stream object some of them name."""
    return {i: re.sub(r" at 0x[0-9a-f]+", "", r) for i, r in bad.items()}


def _same(got: pa.Array, want: pa.Array) -> bool:
    """Equal rows (NaN equal to NaN: the float columns hold the reference's bits)."""
    return bool(got.equals(want)) or repr(got.to_pylist()) == repr(want.to_pylist())


CODEC = AvroCodec(SCHEMA)
TARGET = _target(CODEC)


def test_every_type_has_a_native_plan() -> None:
    assert CODEC._native_plan(TARGET) is not None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_VALUE, st.lists(_EDIT, max_size=3)), min_size=1, max_size=10),
       st.integers(0, 2))
def test_the_native_pass_equals_the_reference(
        cases: list[tuple[dict[str, Any], list[tuple[str, int, int]]]], lead: int) -> None:
    """Values fastavro wrote, some edited, framed or not, from the middle of an array: the
    pass's columns and DLQ reasons are the reference's; values not edited are all taken."""
    clean = [_write(SCHEMA, v) for v, _ in cases]
    values = [_mutated(v, e) for v, (_, e) in zip(clean, cases, strict=True)]
    frame = b"\x00\x00\x00\x00\x07"
    for skip in (0, 5):
        array = pa.array([b"?"] * lead + [frame[:skip] + v for v in values],
                         pa.binary()).slice(lead)
        want, want_bad = ValueCodec.decode_column(CODEC, array, TARGET, skip)
        got, bad = CODEC.decode_column(array, TARGET, skip)
        assert _reasons(bad) == _reasons(want_bad)
        assert _same(got, want)
    node = CODEC._native_plan(TARGET)
    assert node is not None
    written = pa.array(clean, pa.binary())
    _, rejected = core.avro_columns(written.buffers()[2] or b"", written.buffers()[1], 0, node)
    assert all(math.isnan(cases[i][0]["ratio"]) for i in rejected)  # NaN: the reference's


@pytest.mark.parametrize(("value", "reason"), [
    (b"\x02" * 3, "truncated"),  # cut short
    ("trailing", "bytes left"),  # bytes left after the value
    ("bad utf-8", "utf-8"),
])
def test_a_bad_value_among_many_has_the_reference_reason(value: Any, reason: str) -> None:
    good = [_write(SCHEMA, _plain(i)) for i in range(30)]
    bad_value = (good[0] + b"\x00" if value == "trailing" else
                 _write(SCHEMA, _plain(0)).replace(b"n0", b"\xff\xfe") if value == "bad utf-8"
                 else value)
    values = pa.array([*good[:10], bad_value, *good[10:]], pa.binary())
    want, want_bad = ValueCodec.decode_column(CODEC, values, TARGET)
    got, bad = CODEC.decode_column(values, TARGET)
    assert list(bad) == [10] and _reasons(bad) == _reasons(want_bad)
    assert reason in bad[10].lower() or reason == "truncated"
    assert _same(got, want)
    assert [r["id"] for r in got.to_pylist() if r] == list(range(30))


def _plain(i: int) -> dict[str, Any]:
    return {"id": i, "qty": -i, "ok": bool(i % 2), "ratio": i / 2, "price": i / 3,
            "name": f"n{i}", "raw": bytes(i % 3), "kind": "B_2", "digest": b"abcd",
            "note": None if i % 2 else "x", "late": i, "tags": [None, "t"][: i % 3],
            "ship": {"city": "c", "kind2": "A"} if i % 2 else None,
            "lines": [{"city": "l", "kind2": "B_2"}] * (i % 2), "other": b"wxyz"}


@pytest.mark.parametrize(("kind", "value", "taken"), [
    ("long", b"\x80" * 9 + b"\x02", False),  # a long past 64 bits
    ("long", b"\xff" * 9 + b"\x01", True),  # -2^63
    ("int", b"\xfe\xff\xff\xff\x0f", True),  # 2^31 - 1
    ("int", b"\x80\x80\x80\x80\x10", False),  # 2^31: the reference's "does not fit"
    ("boolean", b"\x01", True),
    ("boolean", b"\x02", False),  # a boolean byte 2
    ("float", b"\x00\x00\xc0\x7f", False),  # NaN
    ("string", b"\x04\xed\xa0", False),  # a surrogate (and cut short)
    ("string", b"\x06\xed\xa0\x80", False),  # a surrogate
    ("string", b"\x04\xc3\xa9", True),  # é
    ("string", b"\x01", False),  # a negative length
    ({"type": "array", "items": "long"}, b"\x03\x02\x02\x00", False),  # a block of -2
    # items with its size: the reference reads it
    ({"type": "array", "items": "long"}, b"\x04\x02\x04\x00", True),
    ({"type": "enum", "name": "E", "symbols": ["X"]}, b"\x02", False),  # index 1 of 1
    (["null", "long"], b"\x04\x02", False),  # union branch 2 of 2
])
def test_the_strict_rules(kind: Any, value: bytes, taken: bool) -> None:
    """One field at a time: what the pass takes and what it leaves to the reference;
    either way the reference's rows and reasons."""
    schema = {"type": "record", "name": "One", "fields": [{"name": "v", "type": kind}]}
    codec = AvroCodec(schema)
    target = _target(codec)
    node = codec._native_plan(target)
    assert node is not None
    array = pa.array([value], pa.binary())
    _, rejected = core.avro_columns(array.buffers()[2], array.buffers()[1], 0, node)
    assert (rejected == []) is taken
    want, want_bad = ValueCodec.decode_column(codec, array, target)
    got, bad = codec.decode_column(array, target)
    assert _reasons(bad) == _reasons(want_bad) and _same(got, want)


def test_a_value_that_is_not_a_record() -> None:
    codec = AvroCodec({"type": "array", "items": "long"})
    target = _target(codec)
    assert codec._native_plan(target) is not None
    values = pa.array([_write({"type": "array", "items": "long"}, [1, 2]), b"\x00"])
    got, bad = codec.decode_column(values, target)
    assert not bad and got.to_pylist() == [{"value": [1, 2]}, {"value": []}]


def test_a_table_column_the_schema_lacks_is_null() -> None:
    """The table has evolved past this writer schema: its extra column stays null."""
    wider = AvroCodec({**SCHEMA, "fields": [*SCHEMA["fields"],
                                            {"name": "extra", "type": ["null", "long"]}]})
    target = _target(wider)
    assert CODEC._native_plan(target) is not None
    got, bad = CODEC.decode_column(pa.array([_write(SCHEMA, _plain(3))]), target)
    assert not bad and got.to_pylist()[0]["extra"] is None and got.to_pylist()[0]["id"] == 3


@pytest.mark.parametrize("field", [
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "u", "type": ["null", "long", "string"]},
])
def test_schemas_without_a_plan_go_to_polars_or_one_by_one(field: dict[str, Any]) -> None:
    schema = {"type": "record", "name": "P", "fields": [{"name": "a", "type": "long"}, field]}
    try:
        codec = AvroCodec(schema)
    except ValueError:  # the union of two types has no Iceberg type at all
        return
    assert codec._native_plan(_target(codec)) is None


def test_the_pass_hands_its_buffers_over_without_a_copy() -> None:
    """Its columns' buffers are the pass's own memory (read-only objects, not bytes copied
    from it), read in place by the arrays built on them, and valid after the pass's result
    is dropped."""
    array = pa.array([_write(SCHEMA, _plain(i)) for i in range(40)], pa.binary())
    node = CODEC._native_plan(TARGET)
    assert node is not None
    cols, rejected = core.avro_columns(array.buffers()[2], array.buffers()[1], 0, node)
    assert not rejected
    ids, names = cols[1], cols[6]  # preorder: the record, then id, qty, ok, ratio, price, name
    for buf in (ids[1], ids[2], names[2], names[3]):
        assert not isinstance(buf, bytes) and memoryview(buf).readonly
    assert len(memoryview(ids[2])) == 8 * 40
    struct = column_array(TARGET, node, cols, [0], avro_native._KINDS)
    address = np.frombuffer(ids[2], np.uint8).ctypes.data
    assert struct.field("id").buffers()[1].address == address
    for at, buf in ((1, names[3]), (2, names[2])):  # the offsets, then the text
        assert struct.field("name").buffers()[at].address == np.frombuffer(
            buf, np.uint8).ctypes.data
    del cols, ids, names
    gc.collect()
    assert struct.field("id").to_pylist() == list(range(40))
    assert struct.field("name").to_pylist() == [f"n{i}" for i in range(40)]
