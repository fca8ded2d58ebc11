"""The native core against its pure-Python twins: same inputs, identical results and errors.

Inputs are valid record payloads (built by RecordBatchBuilder), the same payloads mutated
(bytes overwritten, truncated, extended, overlong varints spliced in), hand-encoded records
with arbitrary (up to 70-bit) varints, and random bytes (plain, or random record bodies
behind their true lengths, which are sometimes accepted).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from native_core_support import core, needs_core

from tidelog import _native
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.records.varint import encode_varint
from tidelog.storage import validator
from tidelog.storage.cleaner import batch_filter

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        result = fn(*args)
    except Exception as e:  # the twins must fail alike: same type, same message
        return ("error", type(e), str(e))
    return ("ok", result)


def scan_outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    out = outcome(fn, *args)
    if out[0] == "ok":
        records, end = out[1]
        assert all(type(r) is batch_filter.ScannedRecord for r in records)
        return ("ok", [tuple(r) for r in records], end)
    return out


# -- inputs -----------------------------------------------------------------------------------
record_st = st.tuples(
    st.integers(min_value=-(1 << 40), max_value=1 << 40),  # timestamp
    st.one_of(st.none(), st.binary(max_size=40)),  # key
    st.one_of(st.none(), st.binary(max_size=300)),  # value
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
             max_size=3),
    st.integers(min_value=0, max_value=3),  # offset gap
)


@st.composite
def valid_payloads(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """(payload, count, base offset, base timestamp) of a built batch."""
    recs = draw(st.lists(record_st, max_size=30))
    base = draw(st.integers(min_value=0, max_value=1 << 40))
    b = RecordBatchBuilder(CompressionType.NONE, base_offset=base)
    offset = base
    for ts, key, value, headers, gap in recs:
        offset += gap
        b.append(ts, key, value, headers, offset=offset)
        offset += 1
    batch = RecordBatch(b.build())
    return bytes(batch.records_payload()), batch.records_count, base, batch.base_timestamp


OVERLONG = [b"\xff" * 9 + b"\x7f", b"\xff" * 10, b"\xff" * 11, b"\x80" * 9 + b"\x01",
            b"\xfe" * 9 + b"\x7f", b"\x81\x80", b"\x80", b"\x01", b"\x00", b"\x03"]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    payload, count, base, base_ts = draw(valid_payloads())
    buf = bytearray(payload)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["set", "truncate", "extend", "splice", "count"]))
        pos = draw(st.integers(min_value=0, max_value=max(0, len(buf))))
        if kind == "set" and buf:
            buf[min(pos, len(buf) - 1)] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "extend":
            buf += draw(st.binary(min_size=1, max_size=12))
        elif kind == "splice":
            buf[pos:pos] = draw(st.sampled_from(OVERLONG))
        else:
            count += draw(st.integers(-2, 2))
    return bytes(buf), count, base, base_ts


@st.composite
def hand_encoded(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """Records whose varints may hold any 70-bit raw value (Python's unbounded decode)."""
    varint = st.one_of(
        st.integers(-300, 300).map(encode_varint),
        INT64.map(encode_varint),
        st.integers(0, (1 << 70) - 1).map(_raw70),
    )
    out = bytearray()
    n = draw(st.integers(0, 6))
    for _ in range(n):
        body = bytearray(b"\x00") + draw(varint) + draw(varint) + draw(varint)
        body += draw(st.binary(max_size=6))
        length = draw(st.one_of(st.just(len(body)), st.integers(-5, 40),
                                st.just((1 << 62) + 3)))
        out += _raw70(((length << 1) ^ (length >> 69)) & ((1 << 70) - 1)) + body
    count = n + draw(st.integers(-1, 1))
    return bytes(out), count, draw(INT64), draw(INT64)


def _raw70(raw: int) -> bytes:
    """``raw`` as 1..10 base-128 groups (no zig-zag)."""
    out = bytearray()
    while raw > 0x7F and len(out) < 9:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw & 0x7F)
    return bytes(out)


# bytes of small values (varints 0, -1, 1) parse as records more often than uniform ones
_small_bytes = st.lists(st.sampled_from([0, 1, 2]), min_size=5, max_size=9).map(bytes)


@st.composite
def random_bytes(draw: st.DrawFn) -> tuple[bytes, int, int, int]:
    """Random records: each a random body behind its true length (a body of small bytes
    often parses: those are accepted inputs, whose results the twins must agree on), or
    plain random bytes; the count that of the records, or off by one."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64)), draw(st.integers(-1, 6)), draw(INT64), draw(INT64)
    bodies = draw(st.lists(st.one_of(_small_bytes, st.binary(max_size=12)), max_size=5))
    payload = b"".join(encode_varint(len(b)) + b for b in bodies)
    count = len(bodies) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return payload, count, draw(INT64), draw(INT64)


inputs = st.one_of(valid_payloads(), mutated(), hand_encoded(), random_bytes())


def _scan_native(payload: bytes, base: int, base_ts: int, count: int) -> Any:
    return core.scan(payload, base, base_ts, count, batch_filter.ScannedRecord)


# -- the properties ---------------------------------------------------------------------------
@needs_core
@SETTINGS
@given(inputs)
def test_validator_walk_twins_agree(case: tuple[bytes, int, int, int]) -> None:
    payload, count, _base, _ts = case
    for buf in (payload, memoryview(bytearray(payload))):
        assert outcome(core.walk, buf, count) == outcome(validator._walk_py, buf, count)


@needs_core
@SETTINGS
@given(inputs)
def test_cleaner_scan_twins_agree(case: tuple[bytes, int, int, int]) -> None:
    payload, count, base, base_ts = case
    assert scan_outcome(_scan_native, payload, base, base_ts, count) == \
        scan_outcome(batch_filter._scan_py, payload, base, base_ts, count)


@needs_core
@SETTINGS
@given(valid_payloads())
def test_valid_payloads_are_accepted_by_both(case: tuple[bytes, int, int, int]) -> None:
    """The agreement above is not vacuous: valid batches pass, with the right counts."""
    payload, count, base, base_ts = case
    n, *_ = core.walk(payload, count)
    records, end = _scan_native(payload, base, base_ts, count)
    assert n == count == len(records) and end == len(payload)


def test_random_bytes_are_sometimes_accepted() -> None:
    """The random branch reaches the twins' accepting path too (a comparison of results,
    not only of errors): hypothesis finds such an input, else this fails."""
    payload, count, _, _ = find(random_bytes(),
                                lambda c: c[1] > 0 and outcome(validator._walk_py, c[0], c[1])[0] == "ok",
                                settings=settings(max_examples=2000, database=None))  # fmt: skip
    assert outcome(validator._walk_py, payload, count)[0] == "ok"


def test_a_planted_difference_is_caught() -> None:
    """outcome() tells a changed message apart, so a divergent twin fails the properties."""
    def bad(buf: bytes, count: int) -> object:
        raise validator.InvalidRecordError("record 0 header runs past the batch!")
    assert outcome(bad, b"\x02", 1) != outcome(validator._walk_py, b"\x02", 1)


# -- the switch -------------------------------------------------------------------------------
def _core_name(env: dict[str, str]) -> str:
    code = "from tidelog import _native; print(_native.core_name())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_env_var_forces_the_python_path() -> None:
    assert _core_name({_native.PURE_PYTHON_ENV: "1"}) == "python"


def test_native_core_loaded_when_built() -> None:
    built = importlib.util.find_spec("tidelog._native._core") is not None
    assert _core_name({_native.PURE_PYTHON_ENV: "0"}) == ("native" if built else "python")
    if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it: a silent fallback is a bug
        assert built


def test_hot_loops_bound_to_the_selected_core() -> None:
    if _native.core is None:
        assert validator._walk is validator._walk_py
        assert batch_filter._scan is batch_filter._scan_py
    else:
        assert validator._walk is _native.core.walk
        assert batch_filter._scan is batch_filter._scan_native
