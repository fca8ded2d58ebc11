"""The Spark read path's columnar pass over a run of batches: the native decode_columns and
its Python twin agree on every input (runs of built batches with nulls, headers, gaps,
LogAppendTime and given payloads; mutated and random record bytes; any offset window),
buffers and errors alike; and the buffers hold what the records hold."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numpy")
pytest.importorskip("pyarrow")

from native_core_support import core, needs_core
from test_native_twins import inputs, outcome

from tidelog.records import RecordBatch, RecordBatchBuilder, TimestampType
from tidelog.spark import columns

INT64 = st.integers(-(2**63), 2**63 - 1)
_HEADER = struct.Struct(">qiibIhiqqqhii")


def _native(*args: Any) -> columns.Columns:
    return columns.Columns(*core.decode_columns(*args))  # the module itself, also under the
    # Python switch


def _agree(batches: list[Any], payloads: list[Any], start: int, end: int, headers: bool) -> Any:
    native = outcome(_native, batches, payloads, start, end, headers)
    python = outcome(columns.decode_columns_py, batches, payloads, start, end, headers)
    assert native == python
    return native


@st.composite
def raw_batch(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    """A header with any fields over a (valid, mutated or random) payload, inline or given."""
    payload, count, base, base_ts = draw(inputs)
    attrs = draw(st.sampled_from([0, 8, 0x20, 0x7fff, -1]))
    head = _HEADER.pack(base, 0, 0, 2, 0, attrs, 0, base_ts, draw(INT64), -1, -1, -1, count)
    if draw(st.booleans()):
        return head + payload, None
    return head + draw(st.binary(max_size=20)), payload


@st.composite
def built_batch(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    lat = draw(st.booleans())
    b = RecordBatchBuilder(base_offset=draw(st.integers(0, 2**40)),
                           timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                           log_append_time=draw(st.integers(0, 2**41)) if lat else None)
    offset = -1
    for _ in range(draw(st.integers(0, 12))):
        offset += draw(st.integers(1, 3))
        key = draw(st.one_of(st.none(), st.binary(max_size=70)))
        value = draw(st.one_of(st.none(), st.binary(max_size=200)))
        headers = draw(st.lists(st.tuples(st.sampled_from(["h", "é"]),
                                          st.one_of(st.none(), st.binary(max_size=4))), max_size=2))
        b.append(draw(st.integers(0, 2**41)), key, value, headers, offset=b.base_offset + offset)
    raw = b.build()
    if draw(st.booleans()):
        return raw, None
    return raw, raw[61:]  # the records given, as a decompressed payload is


@needs_core
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(built_batch(), raw_batch()), max_size=5),
       st.one_of(st.tuples(st.just(-(2**63)), st.just(2**63 - 1)), st.tuples(INT64, INT64),
                 st.tuples(st.integers(0, 2**40), st.integers(0, 2**40 + 40))),
       st.booleans())
def test_decode_columns_twins_agree(run: list[tuple[bytes, bytes | None]], window: tuple[int, int],
                                    headers: bool) -> None:
    _agree([b for b, _ in run], [p for _, p in run], window[0], window[1], headers)


@needs_core
def test_bad_arguments_fail_alike() -> None:
    good = RecordBatchBuilder().build()
    assert _agree([good[:60]], [None], 0, 10, True)[1] is ValueError
    assert _agree([good], [], 0, 10, True)[1] is ValueError
    assert _agree([], [], 0, 10, True)[0] == "ok"


@needs_core
def test_columns_hold_the_records() -> None:
    """Across two batches, one given its payload: offsets in the window, keys, values,
    nulls, timestamps, types and the header rows are where the records put them."""
    import numpy as np

    a = RecordBatchBuilder(base_offset=100)
    for i in range(10):
        a.append(5000 + i, None if i == 3 else b"k%d" % i, b"v" * i, [("h", b"x")] if i == 7 else [])
    b = RecordBatchBuilder(base_offset=110, timestamp_type=TimestampType.LOG_APPEND_TIME,
                           log_append_time=77)
    for i in range(5):
        b.append(9000 + i, b"K", None)
    ra, rb = a.build(), b.build()
    out = _agree([ra, rb], [None, RecordBatch(rb).records_payload()], 102, 113, True)
    assert out[0] == "ok"
    c: columns.Columns = out[1]
    assert c.num_rows == 11
    assert np.frombuffer(c.offsets, np.int64).tolist() == list(range(102, 113))
    assert np.frombuffer(c.timestamps, np.int64).tolist() == [
        (5000 + i) * 1000 for i in range(2, 10)] + [77_000] * 3
    assert np.frombuffer(c.types, np.int32).tolist() == [0] * 8 + [1] * 3
    koffs = np.frombuffer(c.key_offsets, np.int32)
    keys = [c.key_data[koffs[i]:koffs[i + 1]] for i in range(11)]
    assert keys[0] == b"k2" and keys[1] == b"" and keys[2] == b"k4" and keys[-1] == b"K"
    assert c.key_nulls == 1 and c.key_validity is not None
    assert np.unpackbits(np.frombuffer(c.key_validity, np.uint8), bitorder="little")[:11].tolist() == [
        1, 0] + [1] * 9
    assert c.value_data == b"".join(b"v" * i for i in range(2, 10)) and c.value_nulls == 3
    hdr = np.frombuffer(c.headers, np.int64).reshape(-1, columns.HEADER_ROW)
    assert hdr[:, [0, 1, 3]].tolist() == [[5, 0, 1]]


def test_columnar_pass_bound_to_the_selected_core() -> None:
    from tidelog import _native

    assert (columns.decode_columns is columns._decode_columns_native) == (_native.core is not None)
