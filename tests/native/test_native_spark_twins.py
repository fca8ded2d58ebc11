"""The Spark decoder's record-boundary walk: native and pure-Python twins agree on every input
(valid payloads, mutated ones, unbounded varints, random bytes), results and errors alike."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numpy")
pytest.importorskip("pyarrow")

from native_core_support import core, needs_core
from test_native_twins import inputs, outcome

from tidelog.spark import decode


def _native(buf: bytes, count: int) -> Any:
    import numpy as np

    return np.frombuffer(core.record_starts(buf, count), dtype=np.int64)


def _result(fn: Any, buf: bytes, count: int) -> tuple[Any, ...]:
    out = outcome(fn, buf, count)
    if out[0] == "ok":
        return ("ok", str(out[1].dtype), out[1].tolist())
    return out


# varints of any length: runs of continuation bytes (0x80 adds no bits, 0xff adds seven)
long_varints = st.lists(
    st.tuples(st.sampled_from([b"\x80", b"\xff", b"\x81"]), st.integers(1, 12),
              st.integers(0, 0x7F)).map(lambda t: t[0] * t[1] + bytes([t[2]])),
    max_size=4).map(b"".join)


@needs_core
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(inputs.map(lambda c: (c[0], c[1])),
                 st.tuples(long_varints, st.integers(-1, 6)),
                 st.tuples(st.binary(max_size=40).flatmap(
                     lambda b: long_varints.map(lambda v: v + b)), st.integers(-1, 6))))
def test_record_starts_twins_agree(case: tuple[bytes, int]) -> None:
    buf, count = case
    assert _result(_native, buf, count) == _result(decode.record_starts_py, buf, count)


@needs_core
def test_huge_positions_fail_alike() -> None:
    """A length varint past 63 bits: Python cannot index with it; neither may the twin."""
    buf = b"\xff" * 12 + b"\x7f" + b"\x00"
    assert _result(_native, buf, 2) == _result(decode.record_starts_py, buf, 2)
    assert _result(_native, buf, 2)[1] is IndexError
    assert _result(_native, buf, 1) == ("ok", "int64", [0])


def test_decoder_bound_to_the_selected_core() -> None:
    from tidelog import _native

    expected = decode.record_starts_py if _native.core is None else decode._record_starts_native
    assert decode.record_starts is expected


# -- the per-record field walk and the key/value gather (record_fields, gather) -------------
def _fields_native(buf: bytes, starts: Any, headers: bool) -> Any:
    import numpy as np

    raw = core.record_fields(buf, starts, headers)  # the module itself: also under the
    return np.frombuffer(raw, np.int64).reshape(decode.FIELDS, len(starts))  # Python switch


def _fields(fn: Any, buf: bytes, starts: Any, headers: bool) -> tuple[Any, ...]:
    out = outcome(fn, buf, starts, headers)
    return ("ok", out[1].tolist()) if out[0] == "ok" else out


@needs_core
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(inputs.map(lambda c: (c[0], c[1])),
                 st.tuples(st.binary(max_size=40).flatmap(
                     lambda b: long_varints.map(lambda v: b"\x00" + v + b + v)),
                     st.integers(0, 6))),
       st.booleans(), st.lists(st.integers(-3, 60), max_size=6))
def test_record_fields_twins_agree(case: tuple[bytes, int], headers: bool,
                                   odd_starts: list[int]) -> None:
    """On the walk's own starts (valid, mutated, random payloads) and on arbitrary ones."""
    import numpy as np

    buf, count = case[0], case[1]
    try:
        starts = decode.record_starts_py(buf, count)
    except Exception:
        starts = np.zeros(0, np.int64)
    for s in (starts, np.array(odd_starts, np.int64)):
        assert _fields(_fields_native, buf, s, headers) == _fields(
            decode.record_fields_py, buf, s, headers)


@needs_core
def test_record_fields_on_a_built_batch() -> None:
    """Keys, values, nulls and headers where the builder put them; a cut payload fails
    alike in both, naming the first record that runs past the end."""
    import numpy as np

    from tidelog.records import RecordBatch, RecordBatchBuilder

    b = RecordBatchBuilder()
    rows = [(None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 0 else b"v" * i,
             [("h", b"x")] if i % 3 == 0 else []) for i in range(40)]
    for i, (k, v, h) in enumerate(rows):
        b.append(1000 + i, k, v, headers=h)
    batch = RecordBatch(b.build())
    payload = bytes(batch.records_payload())
    starts = decode.record_starts(payload, batch.records_count)
    f = decode.record_fields(payload, starts, True)
    for i, (k, v, h) in enumerate(rows):
        assert f[0][i] == i and f[1][i] == i  # offset and timestamp deltas
        got_k = None if f[3][i] < 0 else payload[f[2][i] : f[2][i] + f[3][i]]
        got_v = None if f[5][i] < 0 else payload[f[4][i] : f[4][i] + f[5][i]]
        assert (got_k, got_v, int(f[6][i])) == (k, v, len(h))
    cut = payload[:-3]
    native = _fields(_fields_native, cut, starts, True)
    assert native == _fields(decode.record_fields_py, cut, starts, True)
    assert native[0] == "error" and native[1] is ValueError and "record 39 at byte" in native[2]
    data = np.frombuffer(payload, np.uint8)
    assert bytes(decode.gather(data, f[4], f[5])) == b"".join(v or b"" for _, v, _ in rows)


@needs_core
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.lists(st.tuples(st.integers(-2, 70), st.integers(-3, 70)),
                                        max_size=8))
def test_gather_twins_agree(data: bytes, spans: list[tuple[int, int]]) -> None:
    import numpy as np

    arr = np.frombuffer(data, np.uint8)
    pos = np.array([p for p, _ in spans], np.int64)
    ln = np.array([n for _, n in spans], np.int64)
    native = outcome(lambda: bytes(core.gather(arr, pos, ln)))
    python = outcome(lambda: bytes(decode.gather_py(arr, pos, ln)))
    assert native == python


def test_field_walk_bound_to_the_selected_core() -> None:
    from tidelog import _native

    native = _native.core is not None
    assert (decode.record_fields is decode._record_fields_native) == native
    assert (decode.gather is decode._gather_native) == native


@needs_core
@pytest.mark.parametrize("field", range(5))
@pytest.mark.parametrize("run", [9, 10, 11, 13])
def test_record_fields_over_long_varints(field: int, run: int) -> None:
    """A field varint of ``run`` continuation bytes inside a record long enough to hold it:
    the twins must agree on how far it reaches (numpy's window ends at 10 bytes)."""
    import numpy as np

    body = [b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00"]  # attrs, ts, off, k, v, h
    body[field + 1] = b"\x81" * run + b"\x00"
    rec = b"".join(body) + b"\x00" * 30
    payload = bytes([len(rec) << 1]) + rec
    starts = np.zeros(1, np.int64)
    for headers in (True, False):
        assert _fields(_fields_native, payload, starts, headers) == _fields(
            decode.record_fields_py, payload, starts, headers)
