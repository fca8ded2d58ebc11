"""JSON Schema values decoded by the native core's strict pass (iceberg/json_native.py): the
typed columns and the DLQ's reasons equal the reference's (json.loads value by value) on the
same records: nulls, nested objects, arrays, missing optional fields, numbers out of range,
invalid JSON and UTF-8, values the pass rejects and the reference takes its own way; and the
decode without the native core (pyarrow's reader) does the same."""

from __future__ import annotations

import json
import math
import os
import random
import struct
import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog._native import core
from tidelog.iceberg import json_bulk, json_native
from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.json_values import JsonCodec
from tidelog.iceberg.record_columns import raw_columns
from tidelog.iceberg.rows import Group, Sorted, batch_of, table_rows
from tidelog.iceberg.value_codec import ValueCodec
from tidelog.records import Record

SCHEMA = {"type": "object", "properties": {
    "i": {"type": "integer"}, "s": {"type": ["null", "string"]}, "d": {"type": "number"},
    "b": {"type": "boolean"}, "l": {"type": "array", "items": {"type": "string"}},
    "o": {"type": "object", "properties": {
        "x": {"type": "integer"},
        "ys": {"type": "array", "items": {"$ref": "#/$defs/Y"}}}},
    "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
    "café": {"type": "string"}},
    "$defs": {"Y": {"type": "object", "properties": {"z": {"type": "number"}}}}}

FRAME = b"\x00\x00\x00\x00\x07"


@pytest.fixture(autouse=True)
def _native_core() -> None:
    if core is None:
        if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it
            pytest.fail("the native core is not built")
        pytest.skip("the native core is not built")


def _codec_target() -> tuple[JsonCodec, pa.StructType]:
    codec = JsonCodec(SCHEMA)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    return codec, target


def _good(i: int) -> dict[str, Any]:
    v: dict[str, Any] = {"i": i - 50, "d": i / 8 if i % 2 else i, "b": bool(i % 3),
                         "l": [f"t{j}" for j in range(i % 4)], "café": "ü" * (i % 3),
                         "o": {"x": i, "ys": [{"z": i * 0.1}, {"z": None}][: i % 3]},
                         "at": f"2024-01-02T03:04:{i % 60:02d}Z", "day": "2024-02-29"}
    if i % 5:
        v["s"] = None if i % 5 == 1 else f"s{i}\n\"é\""
    if i % 7 == 0:
        del v["o"]
    return v


def _norm(rows: list[Any]) -> list[Any]:
    """Rows with NaN made comparable."""
    def one(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        if isinstance(v, list):
            return [one(x) for x in v]
        return v
    return [one(r) for r in rows]


def _both(payloads: list[bytes]) -> tuple[Any, Any]:
    """(native, reference): rows and reasons of the same framed values."""
    codec, target = _codec_target()
    values = pa.array([FRAME + p for p in payloads], pa.binary())
    got, bad = codec.decode_column(values, target, 5)
    ref, ref_bad = ValueCodec.decode_column(codec, values, target, 5)
    assert got.type == target
    return (_norm(got.to_pylist()), bad), (_norm(ref.to_pylist()), ref_bad)


def test_good_records_are_all_taken_by_the_pass_and_equal_the_reference() -> None:
    codec, target = _codec_target()
    payloads = [json.dumps(_good(i), indent=2 if i % 9 == 0 else None,
                           ensure_ascii=i % 2 == 0).encode() for i in range(200)]
    values = pa.array([FRAME + p for p in payloads], pa.binary())

    def no_reference(rest: pa.Array) -> tuple[pa.Array, dict[int, str]]:
        raise AssertionError(f"{len(rest)} values rejected")

    got, bad = json_native.decode(values, target, codec_struct(codec), 5, no_reference)
    ref, ref_bad = ValueCodec.decode_column(codec, values, target, 5)
    assert not bad and not ref_bad and got.equals(ref)
    assert json_bulk.decode(values, target, 5).equals(ref)  # the old path's columns too


def codec_struct(codec: JsonCodec) -> Any:
    from pyiceberg.types import StructType

    return StructType(*codec.fields)


EDGES = [
    # integers: floats are the reference's (it truncates them), out of int64 goes to the DLQ
    b'{"i":1.0}', b'{"i":1.5}', b'{"i":1e2}', b'{"i":-0}', b'{"i":"1"}', b'{"i":true}',
    b'{"i":9223372036854775807}', b'{"i":-9223372036854775808}',
    b'{"i":9223372036854775808}', b'{"i":-9223372036854775809}', b'{"i":123456789012345678901}',
    # doubles: as float() reads them; an integer past the range is refused by float(int)
    b'{"d":1}', b'{"d":-0}', b'{"d":-0.0}', b'{"d":"1.5"}', b'{"d":true}', b'{"d":1e400}',
    b'{"d":-1e400}', b'{"d":1e-400}', b'{"d":NaN}', b'{"d":Infinity}', b'{"d":-Infinity}',
    b'{"d":0.1}', b'{"d":1e22}', b'{"d":1e23}', b'{"d":9007199254740993}',
    b'{"d":9007199254740993.0}', b'{"d":1.7976931348623157e308}', b'{"d":5e-324}',
    b'{"d":2.2250738585072011e-308}', b'{"d":12.345678901234567}', b'{"d":1' + b"0" * 400 + b"}",
    b'{"d":0.' + b"0" * 150 + b'1}', b'{"d":1E+2}', b'{"d":1e-2}', b'{"d":-12.5e-3}',
    b'{"d":01}', b'{"d":1.}', b'{"d":.5}', b'{"d":+1}', b'{"d":1e}', b'{"d":-}',
    # booleans, strings
    b'{"b":1}', b'{"b":"true"}', b'{"b":null}', b'{"b":tru}', b'{"s":5}', b'{"s":true}',
    b'{"s":{"a":1}}', b'{"s":[1]}', b'{"s":"\\u00e9\\ud83d\\ude00"}', b'{"s":"\\ud800"}',
    b'{"s":"\\udc00"}', b'{"s":"\\ud800x"}', b'{"s":"\\ud800\\u0041"}', b'{"s":"a\\u0000b"}',
    b'{"s":"\\"\\\\\\/\\b\\f\\n\\r\\t"}', b'{"s":"\\x"}', b'{"s":"\\u12"}', b'{"s":"\\u00G0"}',
    b'{"s":"tab\there"}', b'{"s":"\x7f"}', b'{"s":"\xe9"}', b'{"s":"\xc3\xa9"}',
    b'{"s":"\xc0\x80"}', b'{"s":"\xed\xa0\x80"}', b'{"s":"\xf4\x8f\xbf\xbf"}',
    b'{"s":"\xf4\x90\x80\x80"}', b'{"s":"\xe0\x80\xaf"}', b'{"s":"\xf0\x9f\x98"}',
    b'{"s":"unterminated}',
    # arrays, objects
    b'{"l":"ab"}', b'{"l":{"a":1}}', b'{"l":[1,2]}', b'{"l":[null,"x"]}', b'{"l":null}',
    b'{"l":[]}', b'{"l":[,]}', b'{"l":["a",]}', b'{"l":["a" "b"]}', b'{"o":5}', b'{"o":[1]}',
    b'{"o":{"x":2,"y":3}}', b'{"o":{}}', b'{"o":null}', b'{"o":{"ys":[{"z":1},null,{}]}}',
    b'{"o":{"ys":[{"z":"no"}]}}', b'{"o":{"x":1,"x":2}}',
    # whole values
    b"5", b"[]", b"null", b'"x"', b"{", b'{"i":1} x', b'{"i":1}{"i":2}', b"", b"  ",
    b'  {"i":1}  ', b'{"i":1,"i":2}', b'{"\\u0069":3}', b'{"caf\\u00e9":"x"}',
    b'{"caf\xc3\xa9":"y"}', b'{"zz":1}', b'{"zz":[1,{"a":[true,false,null,"\\n"]}]}',
    b'{"zz":[1,}', b'{"zz":"\xff"}', b'{"zz":nul}', b'{\n"i":\r\n1\t}', b'{"i":1,}',
    b"{'i':1}", b'{"i":1}\n{"i":2}', b'\xef\xbb\xbf{"i":1}', b'{"i":1}\x00', b'{i:1}',
    b'{"i" 1}', b'{"zz":' + b"[" * 300 + b"]" * 300 + b"}",
    # timestamps and dates, cast from their strings (or, when pyarrow's cast does not read
    # them, the reference's fromisoformat)
    b'{"at":"2024-01-02T03:04:05+02:00","day":"2024-02-29"}', b'{"at":null,"day":null}',
    b'{"at":"2024-01-02T03:04:05"}', b'{"at":"2024-01-02"}', b'{"at":"2024-01-02T24:00:00Z"}',
    b'{"at":"2024-01-02T03:04:05,5Z"}', b'{"at":"2024-01-02T23:59:60Z"}', b'{"at":5}',
    b'{"day":"20240229"}', b'{"day":"2024-02-30"}', b'{"day":"2024-02-29T00:00"}',
]


@pytest.mark.parametrize("native", [True, False], ids=["native", "pyarrow"])
@pytest.mark.parametrize("edge", EDGES, ids=lambda e: repr(e)[:40])
def test_an_edge_value_among_good_ones_decodes_as_the_reference_decodes_it(
        edge: bytes, native: bool, monkeypatch: Any) -> None:
    """Also without the native core: pyarrow's reader, or the reference when it refuses."""
    if not native:
        monkeypatch.setattr(json_native, "available", lambda: False)
    payloads = [json.dumps(_good(i)).encode() for i in range(6)]
    payloads.insert(3, edge)
    assert _both(payloads)[0] == _both(payloads)[1]


def test_invalid_json_and_out_of_range_numbers_go_to_the_dlq_with_the_reason() -> None:
    good = [json.dumps(_good(i)).encode() for i in range(5)]
    records = [Record(i, 1_700_000_000_000 + i, None, FRAME + v, []) for i, v in enumerate(
        [good[0], b'{"i": 1', good[1], b'{"i": 9223372036854775808}', good[2],
         b'{"s": "\xff"}', b'{"d": 1' + b"0" * 400 + b"}", good[3]])]
    codec, _ = _codec_target()
    raw = raw_columns(batch_of(records), 0, 0, 2**62)
    group = Group(codec, np.arange(len(records), dtype=np.int64),
                  raw.column("value").combine_chunks(), 5)
    s = Sorted(raw, [group])
    rows = table_rows(s, table_schema(codec.fields))
    assert rows.column("i").to_pylist() == [-50, -49, -48, -47]
    assert sorted(s.dlq) == [1, 3, 5, 6]
    assert s.dlq[1].startswith("value does not parse: Expecting ',' delimiter")
    assert s.dlq[3].startswith("value does not fit the table's columns")
    assert s.dlq[5].startswith("value does not parse: 'utf-8' codec can't decode")
    assert s.dlq[6].startswith("value does not parse: int too large to convert to float")


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
                     | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["x", "ys", "z", "q"]), inner,
                                       max_size=3), max_leaves=8)
_FIELD = {"i": st.integers(-2**64, 2**64), "s": st.none() | st.text(max_size=8),
          "d": st.floats() | st.integers(-2**60, 2**60), "b": st.booleans(),
          "l": st.lists(st.none() | st.text(max_size=4), max_size=4),
          "o": st.fixed_dictionaries({}, optional={
              "x": st.integers(-2**63, 2**63 - 1),
              "ys": st.lists(st.none() | st.fixed_dictionaries({}, optional={
                  "z": st.floats() | st.integers(-100, 100)}), max_size=3)}),
          "café": st.text(max_size=3)}
_VALUE = st.fixed_dictionaries({}, optional={k: v | _JSON if k != "o" else v
                                             for k, v in _FIELD.items()})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_VALUE, st.booleans(), st.booleans(), st.integers(0, 2**16)),
                min_size=1, max_size=8))
def test_random_values_decode_as_the_reference_decodes_them(
        values: list[tuple[dict[str, Any], bool, bool, int]]) -> None:
    """Random objects of the schema's fields (of the right type or any JSON), written with
    and without blanks and escapes, some cut or with a byte changed."""
    payloads = []
    for value, ascii_, indent, damage in values:
        text = json.dumps(value, ensure_ascii=ascii_, indent=1 if indent else None).encode()
        if damage % 5 == 0 and text:
            text = text[: damage % len(text)]
        elif damage % 5 == 1 and text:
            at = damage % len(text)
            text = text[:at] + bytes([damage >> 8 & 0xFF]) + text[at + 1:]
        payloads.append(text)
    assert _both(payloads)[0] == _both(payloads)[1]


def test_without_the_native_core_pyarrows_reader_gives_the_same(monkeypatch: Any) -> None:
    payloads = [json.dumps(_good(i)).encode() for i in range(40)]
    payloads[7] = b'{"i": "x"}'
    native = _both(payloads)[0]
    monkeypatch.setattr(json_native, "available", lambda: False)
    assert _both(payloads)[0] == native
    assert _both([json.dumps(_good(i)).encode() for i in range(40)])[0][0] == _both(
        [json.dumps(_good(i)).encode() for i in range(40)])[1][0]


def test_a_first_value_of_null_does_not_reach_pyarrows_reader() -> None:
    """pyarrow's JSON reader ends the process (SIGSEGV) on a first line ``null``: without the
    native core such values are the reference's, in a child process to see a crash."""
    code = (
        "import pyarrow as pa\n"
        "from tidelog.iceberg import json_native\n"
        "json_native.available = lambda: False\n"
        "from tidelog.iceberg.json_values import JsonCodec\n"
        "c = JsonCodec({'type': 'object', 'properties': {'i': {'type': 'integer'}}})\n"
        "t = pa.struct([pa.field('i', pa.int64())])\n"
        "rows, bad = c.decode_column(pa.array([b'null', b'{\"i\": 2}']), t)\n"
        "print(rows.to_pylist(), bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[None, {'i': 2}] {}"


def test_an_object_of_more_columns_than_the_pass_takes_is_read_another_way() -> None:
    schema = {"type": "object", "properties": {
        f"f{i}": {"type": "integer"} for i in range(json_native.MAX_FIELDS + 1)}}
    codec = JsonCodec(schema)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    values = [{f"f{i}": i * j for i in range(0, json_native.MAX_FIELDS + 1, 3)}
              for j in range(5)]
    payloads = pa.array([json.dumps(v).encode() for v in values] + [b'{"f0": "x"}'])
    got, bad = codec.decode_column(payloads, target)
    ref, ref_bad = ValueCodec.decode_column(codec, payloads, target)
    assert got.equals(ref) and list(bad) == list(ref_bad) == [5]
    assert got.to_pylist()[2]["f63"] == 126


def test_a_table_column_the_values_schema_lacks_stays_null_as_in_the_reference() -> None:
    """A table evolved by a newer schema version: the older version's values leave its new
    columns null, even when they carry a key of that name (json.loads' rows do too)."""
    older = JsonCodec({"type": "object", "properties": {"a": {"type": "integer"}}})
    newer = JsonCodec({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "string"},
        "o": {"type": "object", "properties": {"x": {"type": "integer"}}}}})
    target = pa.struct([f for f in arrow_schema(table_schema(newer.fields)) if f.name != KAFKA])
    payloads = pa.array([b'{"a": 1, "b": "x", "o": {"x": 2}}', b'{"a": 2}', b'{"b": 5}'])
    got, bad = older.decode_column(payloads, target)
    ref, ref_bad = ValueCodec.decode_column(older, payloads, target)
    assert not bad and not ref_bad and got.equals(ref)
    assert got.to_pylist() == [{"a": 1, "b": None, "o": None}, {"a": 2, "b": None, "o": None},
                               {"a": None, "b": None, "o": None}]


def _number_tokens(seed: int, n: int) -> list[str]:
    """Numbers as JSON writes them: doubles' reprs (any bit pattern), midpoints between two
    doubles written to 19 digits, random decimals of up to 20 digits, integers with
    exponents."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 5
        if kind == 0:
            t = repr(struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0])
        elif kind == 1:
            x = rng.random() * 10 ** rng.randint(-5, 15)
            t = f"{(x + float(np.nextafter(x, 2 * x + 1))) / 2:.18e}"
        elif kind == 2:
            digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
            t = f"{rng.randint(1, 9)}{digits}e{rng.randint(-32, 32)}"
        elif kind == 3:
            t = str(rng.getrandbits(rng.randint(1, 64)) * rng.choice([1, -1]))
        else:
            t = repr(rng.uniform(-1e6, 1e6))
        if "n" not in t:  # nan, inf: not JSON numbers
            out.append(t)
    return out


def test_numbers_are_the_doubles_float_gives() -> None:
    """Every number the pass reads is the double json.loads + float() give (its fast paths
    included: Eisel-Lemire must leave a midpoint it cannot decide to Python's dtoa)."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    tokens = _number_tokens(seed, 20_000)
    values = pa.array([b'{"d":' + t.encode() + b"}" for t in tokens], pa.binary())
    node = (json_native.STRUCT, (b"d",), ((json_native.DOUBLE, (), ()),))
    offsets = np.frombuffer(values.buffers()[1], np.int32)[: len(values) + 1]
    assert core is not None
    cols, rejected = core.json_columns(values.buffers()[2], offsets, 0, node)
    got = np.frombuffer(cols[1][2], np.float64)
    refused = set(rejected)
    for i, t in enumerate(tokens):
        if i in refused:  # only an integer past a double's range
            with pytest.raises(OverflowError):
                float(json.loads(t))
            continue
        want = float(json.loads(t))
        assert got[i] == want and math.copysign(1, got[i]) == math.copysign(1, want), t


def _doubles(tokens: list[str]) -> tuple[np.ndarray, set[int]]:
    values = pa.array([b'{"d":' + t.encode() + b"}" for t in tokens], pa.binary())
    node = (json_native.STRUCT, (b"d",), ((json_native.DOUBLE, (), ()),))
    offsets = np.frombuffer(values.buffers()[1], np.int32)[: len(values) + 1]
    assert core is not None
    cols, rejected = core.json_columns(values.buffers()[2], offsets, 0, node)
    return np.frombuffer(cols[1][2], np.float64), set(rejected)


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


_DIGITS = st.text("0123456789", min_size=1, max_size=21)


@st.composite
def _number_text(draw: st.DrawFn) -> str:
    """A JSON number's text: a double's repr (any bit pattern), the midpoint of two
    neighbouring doubles (exact, or cut to 16-20 digits), or digits with a point and an
    exponent anywhere in (and past) a double's range."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        x = struct.unpack("<d", struct.pack("<Q", draw(st.integers(0, 2**64 - 1))))[0]
        return repr(x) if math.isfinite(x) else "1e999"
    if kind == 1:
        x = abs(draw(st.floats(allow_nan=False, allow_infinity=False, min_value=5e-324)))
        up = math.nextafter(x, math.inf)
        if not math.isfinite(up):
            return repr(x)
        from decimal import Decimal

        mid = (Decimal(x) + Decimal(up)) / 2
        return f"{mid:.{draw(st.integers(15, 19))}e}" if draw(st.booleans()) else f"{mid:e}"
    sign = draw(st.sampled_from(["", "-"]))
    whole, frac = draw(_DIGITS), draw(st.none() | _DIGITS)
    whole = whole.lstrip("0") or "0"
    exp = draw(st.none() | st.integers(-360, 330))
    return (sign + whole + ("" if frac is None else "." + frac)
            + ("" if exp is None else f"e{exp}"))


@settings(max_examples=300, deadline=None)
@given(st.lists(_number_text(), min_size=1, max_size=40))
def test_number_texts_read_bit_for_bit_as_float_reads_them(tokens: list[str]) -> None:
    """The pass's double of each number text is float(json.loads(text)), bit for bit (the
    sign of zero too): its exact fast paths (Clinger's, Eisel-Lemire) and the dtoa they
    leave the undecided ones to."""
    got, refused = _doubles(tokens)
    for i, t in enumerate(tokens):
        if i in refused:
            with pytest.raises(OverflowError):
                float(json.loads(t))
            continue
        assert _bits(got[i]) == _bits(float(json.loads(t))), t


def test_hard_number_texts_read_as_float_reads_them() -> None:
    """Ties to even at the fast paths' edges, the smallest and largest doubles, subnormals,
    19 and 20 digits, powers of ten at the table's ends."""
    tokens = ["9007199254740993", "9007199254740995", "9007199254740993e0",
              "4503599627370497.5", "1.00000000000000011102230246251565404236316680908203125",
              "1.00000000000000011102230246251565404236316680908203124",
              "1.00000000000000011102230246251565404236316680908203126",
              "2.2250738585072011e-308", "2.2250738585072014e-308", "4.9406564584124654e-324",
              "2.4703282292062327e-324", "2.4703282292062328e-324", "1.7976931348623157e308",
              "1.7976931348623158e308", "1.7976931348623159e308", "9999999999999999999",
              "9999999999999999999e-342", "1e-342", "1e-343", "1e308", "1e309", "123e306",
              "18446744073709551615", "18446744073709551616", "1844674407370955161.5",
              "0.1", "0.30000000000000004", "7.8459735791271921e65", "3.5e-320",
              "8.98846567431158e307", "0e999", "-0e-999", "0.000e5", "-0.0",
              "5e-324", "3e-324", "2e-324", "1e23", "8.589973e9", "1.5e27", "1.5e28"]
    got, refused = _doubles(tokens)
    for i, t in enumerate(tokens):
        assert i not in refused, t
        assert _bits(got[i]) == _bits(float(json.loads(t))), t


def test_the_pass_hands_its_buffers_over_without_a_copy() -> None:
    """Its columns' buffers are the pass's own memory (not bytes copied from it), read in
    place by Arrow, and they live as long as the arrays built on them."""
    codec, target = _codec_target()
    values = pa.array([FRAME + json.dumps(_good(i)).encode() for i in range(50)], pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[: len(values) + 1]
    node = json_native.plan(target, codec_struct(codec))
    assert core is not None
    cols, rejected = core.json_columns(values.buffers()[2], offsets, 5, node)
    assert not rejected
    ids = cols[1]
    assert not isinstance(ids[2], bytes)
    assert memoryview(ids[2]).readonly and len(memoryview(ids[2])) == 8 * 50
    array = pa.Array.from_buffers(pa.int64(), ids[0], [None, pa.py_buffer(ids[2])])
    assert array.buffers()[1].address == np.frombuffer(ids[2], np.uint8).ctypes.data
    del cols, ids
    assert array.to_pylist() == [i - 50 for i in range(50)]


def test_keys_in_any_order_and_names_sharing_a_prefix_read_as_the_reference() -> None:
    """The pass first compares the key with the next field's name in place: other orders,
    names that start alike, escaped keys, and a key that is a name's prefix or extension."""
    schema = {"type": "object", "properties": {
        "a": {"type": "integer"}, "ab": {"type": "integer"}, "abc": {"type": ["null", "string"]},
        'q"': {"type": "integer"}, "é": {"type": "integer"}}}
    codec = JsonCodec(schema)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    rng = random.Random(5)
    texts = [b'{"a":1,"ab":2,"abc":"x"}', b'{"abc":"y","ab":3,"a":4}', b'{"ab":5}',
             b'{"a":6,"abcd":7,"ab":8}', b'{"\\u0061":9,"a\\u0062":10}', b'{"a":1,"a":2}',
             b'{"q\\"":11,"\\u00e9":12}', b'{"\xc3\xa9":13,"q\\u0022":14}', b'{"abc":null}',
             b'{"ab":1,"abc":"z","a":2}', b'{"a ":1}', b'{"":1,"a":3}', b'{"a":1,"ab"}']
    for _ in range(60):
        keys = rng.sample(["a", "ab", "abc", "abcd", "b"], rng.randint(0, 5))
        texts.append(json.dumps({k: (f"v{k}" if k == "abc" else len(k)) for k in keys}).encode())
    values = pa.array(texts, pa.binary())
    got, bad = codec.decode_column(values, target)
    ref, ref_bad = ValueCodec.decode_column(codec, values, target)
    assert got.equals(ref) and bad.keys() == ref_bad.keys()
    assert got.to_pylist()[1] == {"a": 4, "ab": 3, "abc": "y", 'q"': None, "é": None}
