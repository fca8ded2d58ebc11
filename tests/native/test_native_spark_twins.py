"""The Spark decoder's record-boundary walk: native and pure-Python twins agree on every input
(valid payloads, mutated ones, unbounded varints, random bytes), results and errors alike."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numpy")
pytest.importorskip("pyarrow")

from tidelog.spark import decode

sys.path.insert(0, str(Path(__file__).parent))
from test_native_twins import inputs, outcome

try:
    core: Any = importlib.import_module("tidelog._native._core")
except ImportError:
    core = None
needs_core = pytest.mark.skipif(core is None, reason="native core not built")


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
