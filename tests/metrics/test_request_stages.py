"""RequestStats keeps its six stage histograms in one int64 table (one call per request,
native or its twin, whichever this process bound): read back, each is the LatencyHistogram
the same readings give (counts, sum, count, quantiles), and the rate by version counts each
request once."""

from __future__ import annotations

import importlib.util
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog import _native
from tidelog.metrics import requests
from tidelog.metrics.histogram import LatencyHistogram
from tidelog.metrics.requests import STAGES, RequestStats

reading = st.one_of(st.integers(0, 10**9), st.integers(0, (1 << 60) - 1))
request = st.tuples(st.integers(0, 13), reading, reading, reading, reading, reading)


@settings(max_examples=200, deadline=None)
@given(st.lists(request, min_size=1, max_size=12))
def test_stage_histograms_read_as_latency_histograms(reqs: list[tuple[int, ...]]) -> None:
    stats = RequestStats("Produce")
    plain = {stage: LatencyHistogram() for stage in STAGES}
    rate: dict[int, int] = {}
    for version, *ns in reqs:
        stats.record(version, *ns)
        rate[version] = rate.get(version, 0) + 1
        for stage, value in zip(STAGES, [sum(ns), *ns], strict=True):
            plain[stage].observe_ns(value)
    assert stats.requests == rate
    for stage in STAGES:
        h, want = stats.stages[stage], plain[stage]
        assert (h.counts, h.sum_ns, h.count, h.sum_ms) == (
            want.counts, want.sum_ns, want.count, want.sum_ms)
        assert h.quantiles() == want.quantiles()


def test_a_request_is_one_call_to_the_selected_core() -> None:
    built = importlib.util.find_spec("tidelog._native._stages") is not None
    if os.environ.get("TIDELOG_REQUIRE_NATIVE"):  # CI builds it: a silent fallback is a bug
        assert built
    pure = os.environ.get(_native.PURE_PYTHON_ENV, "") not in ("", "0")
    if built and not pure:
        assert _native.observe_stages is not None
        assert requests._record is _native.observe_stages
        assert requests._record_timing is _native.observe_request
    else:
        assert requests._record is requests.record_py
        assert requests._record_timing is requests.record_timing_py


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 3]), st.integers(0, 13),
                          st.integers(0, 10**6), st.integers(0, 10**6),
                          st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=8))
def test_one_response_recorded_alone_as_in_a_list(reqs: list[tuple[int, ...]]) -> None:
    """``record_sent_one`` (the connection's one-response flush) leaves every RequestStats
    as ``record_sent`` of a one-element list does (Fetch counted as FetchConsumer too)."""
    by_list, alone = requests.RequestMetrics(), requests.RequestMetrics()
    for key, version, start, queue, local, rqueue in reqs:
        t = requests.RequestTiming(key, version, start, start, start)
        t.dequeue_ns = start + queue
        t.complete_ns = t.dequeue_ns + local
        by_list.record_sent([t], t.complete_ns + rqueue)
        alone.record_sent_one(t, t.complete_ns + rqueue)

    def seen(m: requests.RequestMetrics) -> dict[str, tuple[dict[int, int], list[int]]]:
        return {name: (s.requests, [h.count for h in s.stages.values()])
                for name, s in m.by_name.items()}

    assert set(alone.by_name) == set(by_list.by_name) >= {requests.api_name(k)
                                                          for k, *_ in reqs}
    assert seen(alone) == seen(by_list)
    for name, s in alone.by_name.items():  # the send stage: each ends at its own clock
        assert [h.count for h in s.stages.values()] == [sum(s.requests.values())] * 6, name
