"""_native/request_stages.c against its twin, metrics/requests.py record_py: for any clock
readings (equal, zero, huge, negative from out-of-order clocks, beyond int64) one request's
observation leaves the same version counts, bucket counts and sums in the int64 table, or both
refuse it (the native one with OverflowError, before writing anything; the twin's sums are
Python ints, so there only its bucket index can fail)."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidelog.metrics.histogram import LatencyHistogram, histogram_table
from tidelog.metrics.requests import STAGES, RequestTiming, record_py, record_timing_py

try:
    stages: Any = importlib.import_module("tidelog._native._stages")
except ImportError:
    stages = None
needs_stages = pytest.mark.skipif(stages is None, reason="native core not built")

pytestmark = [needs_stages, pytest.mark.skipif(bool(os.environ.get("TIDELOG_PURE_PYTHON")),
                                               reason="the twins alone: the core is not bound")]
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

INT64 = 1 << 63
# the edges of every bucket and of int64, and the small and ordinary values in between
EDGES = [0, 1, -1, INT64 - 1, -(INT64 - 1), -INT64, INT64, INT64 + 1, 1 << 64, -(1 << 70)]
EDGES += [s * ((1 << k) + d) for k in range(1, 63) for d in (-1, 0) for s in (1, -1)]
reading = st.one_of(st.sampled_from(EDGES), st.integers(-10**6, 10**9),
                    st.integers(-(1 << 66), 1 << 66))
request = st.tuples(st.integers(0, 13), reading, reading, reading, reading, reading)


def as_table(hists: tuple[LatencyHistogram, ...]) -> list[int]:
    return [cell for h in hists for cell in [*h.counts, h.sum_ns]]


@SETTINGS
@given(st.lists(request, min_size=1, max_size=12))
@example([(0, 0, 0, 1, INT64 - 1, -1)])  # the running total leaves int64, the total does not
@example([(1, 1 << 62, 0, 0, 0, 0), (1, 1 << 62, 0, 0, 0, 0)])  # the second sum overflows
@example([(3, 5, 5, 5, 5, 5), (3, 5, 5, 5, 5, 5)])  # equal readings, equal requests
def test_native_observes_what_the_twin_observes(reqs: list[tuple[int, ...]]) -> None:
    table = histogram_table(len(STAGES))
    hists = tuple(LatencyHistogram() for _ in STAGES)
    rate_c: dict[int, int] = {}
    rate_py: dict[int, int] = {}
    for req in reqs:
        before = table.tolist(), dict(rate_c)
        try:
            stages.observe_stages(table, rate_c, *req)
        except OverflowError:
            # untouched; and the twin has no bucket for a reading, or its sum left int64
            assert (table.tolist(), rate_c) == before
            try:
                record_py(hists, rate_py, *req)
            except IndexError:
                return
            assert any(not -INT64 <= h.sum_ns < INT64 for h in hists), req
            return
        record_py(hists, rate_py, *req)  # raises if it has no bucket where the native had
        assert table.tolist() == as_table(hists), req
        assert rate_c == rate_py


clock = st.one_of(st.sampled_from(EDGES), st.integers(0, 10**13), st.integers(-(1 << 64), 1 << 64))
timed = st.tuples(st.integers(0, 13), clock, clock, clock, clock, clock, clock)


@SETTINGS
@given(st.lists(timed, min_size=1, max_size=12))
@example([(9, 10**12, 10**12, 10**12, 0, 10**12, 10**12)])  # every reading equal
@example([(9, 100, 50, 70, 5, 60, 10)])  # out of order: negative stages
@example([(9, -INT64 + 1, INT64 - 1, 0, 0, 0, 0)])  # a difference beyond int64
def test_native_reads_a_request_timing_as_the_twin(reqs: list[tuple[int, ...]]) -> None:
    table = histogram_table(len(STAGES))
    hists = tuple(LatencyHistogram() for _ in STAGES)
    rate_c: dict[int, int] = {}
    rate_py: dict[int, int] = {}
    for version, start, dequeue, complete, remote, resp, end in reqs:
        t = RequestTiming(0, version, start, start, start)
        t.dequeue_ns, t.complete_ns, t.remote_ns = dequeue, complete, remote
        before = table.tolist(), dict(rate_c)
        try:
            stages.observe_request(table, rate_c, t, resp, end)
        except OverflowError:
            assert (table.tolist(), rate_c) == before
            try:
                record_timing_py(hists, rate_py, t, resp, end)
            except IndexError:
                return
            # the twin's ints are unbounded: only a clock beyond int64 or a sum left it
            assert any(not -INT64 < v < INT64 for v in (start, dequeue, complete, remote, resp,
                                                        end)) or any(
                not -INT64 <= h.sum_ns < INT64 for h in hists), (start, dequeue, complete)
            return
        record_timing_py(hists, rate_py, t, resp, end)
        assert table.tolist() == as_table(hists)
        assert rate_c == rate_py


def test_only_the_bound_request_timing_is_read() -> None:
    class Other(RequestTiming):
        __slots__ = ()

    with pytest.raises(TypeError):
        stages.observe_request(histogram_table(6), {}, Other(0, 1, 2), 3, 4)
    with pytest.raises(TypeError):
        stages.observe_request(histogram_table(6), {}, object(), 3, 4)


def test_a_wrong_table_is_refused() -> None:
    from array import array

    with pytest.raises(ValueError):
        stages.observe_stages(array("q", [0] * 10), {}, 0, 1, 2, 3, 4, 5)
    with pytest.raises(ValueError):
        stages.observe_stages(array("d", [0.0] * 6 * 65), {}, 0, 1, 2, 3, 4, 5)
    with pytest.raises(TypeError):
        stages.observe_stages(histogram_table(6), [], 0, 1, 2, 3, 4, 5)
