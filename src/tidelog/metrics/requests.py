"""Kafka's RequestMetrics: per API, the request rate by version and the time a request
spends in each stage (RequestChannel.updateRequestMetrics):

* RequestQueueTimeMs: frame read -> its handler starts running on the loop
* LocalTimeMs: handler running, minus RemoteTimeMs
* RemoteTimeMs: parked in a purgatory (a Fetch long poll waiting for data)
* ResponseQueueTimeMs: handler done -> the response is handed to the socket (responses
  leave in request order, so a fast response waits behind a slow one)
* ResponseSendTimeMs: handing the response to the transport (sendfile for fetch data)
* TotalTimeMs: the sum.

The connection records these in one place; the purgatory adds its waits to the current
request through a context variable (each handler runs in its own task, so its own context).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass

from tidelog._native import observe_request, observe_request_bind, observe_stages

from .histogram import LatencyHistogram, StageHistogram, histogram_table

# Kafka's ApiKeys names: the ``request`` label of kafka.network:type=RequestMetrics.
API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs",
    36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups",
    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 60: "DescribeCluster", 61: "DescribeProducers",
    65: "DescribeTransactions", 66: "ListTransactions",
}  # fmt: skip
FETCH_KEY = 1
STAGES = (
    "total", "request_queue", "local", "remote", "response_queue", "response_send",
)  # fmt: skip
# stage -> Kafka's metric name (kafka.network:type=RequestMetrics,name=...)
STAGE_NAMES = {
    "total": "TotalTimeMs",
    "request_queue": "RequestQueueTimeMs",
    "local": "LocalTimeMs",
    "remote": "RemoteTimeMs",
    "response_queue": "ResponseQueueTimeMs",
    "response_send": "ResponseSendTimeMs",
}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"ApiKey{api_key}")


@dataclass(slots=True, eq=False)
class RequestTiming:
    """One request's clock readings (perf_counter_ns), filled in as it moves along: made at
    its start with ``dequeue_ns`` and ``complete_ns`` at ``start_ns`` too (a slotted
    dataclass: the connection makes one per request without a Python __init__,
    util/slotted.py)."""

    api_key: int
    api_version: int
    start_ns: int
    dequeue_ns: int
    complete_ns: int
    remote_ns: int = 0

    def completed(self) -> None:
        """The handler ended (LocalTimeMs and RemoteTimeMs end here)."""
        self.complete_ns = time.perf_counter_ns()


CURRENT_REQUEST: ContextVar[RequestTiming | None] = ContextVar("tidelog_request", default=None)


def add_remote_time(ns: int) -> None:
    """Time the current request spent parked in a purgatory (RemoteTimeMs)."""
    timing = CURRENT_REQUEST.get()
    if timing is not None:
        timing.remote_ns += ns


def begin_request(timing: RequestTiming) -> Token[RequestTiming | None]:
    """The handler of ``timing``'s request starts now: its dequeue time, and the timing
    current (``add_remote_time``) in the context the handler's task copies; give the token
    back to ``CURRENT_REQUEST.reset`` once the task is made. The handler's end is
    ``timing.completed`` (no coroutine wrapped around the handler's)."""
    timing.dequeue_ns = time.perf_counter_ns()
    return CURRENT_REQUEST.set(timing)


def record_py(hists: tuple[LatencyHistogram, ...], requests: dict[int, int], version: int,
              queue: int, local: int, remote: int, rqueue: int, send: int) -> None:  # fmt: skip
    """The rate by version and the six stage observations of one request, on six
    LatencyHistograms (STAGES order; observe_ns inlined: this runs once per request, so no
    calls and no loop); _native/request_stages.c is its twin on an int64 table. A reading or
    total of 2^63 ns or more has no bucket (IndexError); the twin's sums are unbounded."""
    requests[version] = requests.get(version, 0) + 1
    total_h, queue_h, local_h, remote_h, rqueue_h, send_h = hists
    total = queue + local + remote + rqueue + send
    total_h.counts[total.bit_length()] += 1
    total_h.sum_ns += total
    queue_h.counts[queue.bit_length()] += 1
    queue_h.sum_ns += queue
    local_h.counts[local.bit_length()] += 1
    local_h.sum_ns += local
    remote_h.counts[remote.bit_length()] += 1
    remote_h.sum_ns += remote
    rqueue_h.counts[rqueue.bit_length()] += 1
    rqueue_h.sum_ns += rqueue
    send_h.counts[send.bit_length()] += 1
    send_h.sum_ns += send


def record_timing_py(hists: tuple[LatencyHistogram, ...], requests: dict[int, int],
                     t: RequestTiming, response_dequeue_ns: int, end_ns: int) -> None:  # fmt: skip
    """``record_py`` of the stages between ``t``'s clock readings (Kafka's
    RequestChannel.updateRequestMetrics); _native/request_stages.c observe_request is its
    twin. perf_counter_ns is monotonic and each reading follows the one before: no clamping;
    ``remote_ns`` is measured inside the handler, so never above the handler's time."""
    complete = t.complete_ns
    remote = t.remote_ns
    record_py(hists, requests, t.api_version, t.dequeue_ns - t.start_ns,
              complete - t.dequeue_ns - remote, remote, response_dequeue_ns - complete,
              end_ns - response_dequeue_ns)  # fmt: skip


# the table (native) or the six histograms (twin): ``RequestStats.cells`` fits the one bound
_record: Callable[..., None] = observe_stages or record_py
_record_timing: Callable[..., None] = observe_request or record_timing_py
record_timing = _record_timing  # (one request's stages: ``record_timing_py`` or its native twin)
if observe_request_bind is not None:
    observe_request_bind(RequestTiming)  # the slots observe_request reads


class RequestStats:
    """Kafka's RequestMetrics for one request name; a request is one call: with the native
    core the six stage histograms share one int64 table (``observe_stages``), else they are
    six LatencyHistograms (``record_py``). ``cells`` is what that call takes."""

    __slots__ = ("cells", "name", "requests", "stages")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}  # version -> count (RequestsPerSec)
        self.cells: array[int] | tuple[LatencyHistogram, ...]
        if observe_stages is not None:
            self.cells = table = histogram_table(len(STAGES))
            hists: tuple[LatencyHistogram, ...] = tuple(
                StageHistogram(table, i) for i in range(len(STAGES))
            )
        else:
            self.cells = hists = tuple(LatencyHistogram() for _ in STAGES)
        self.stages = dict(zip(STAGES, hists, strict=True))

    def record(self, version: int, queue: int, local: int, remote: int, rqueue: int,
               send: int) -> None:  # fmt: skip
        _record(self.cells, self.requests, version, queue, local, remote, rqueue, send)


class RequestMetrics:
    """Every API's RequestStats; Fetch also counts as FetchConsumer (Kafka splits consumer
    and follower fetches; a single node has only consumers)."""

    def __init__(self) -> None:
        self.by_name: dict[str, RequestStats] = {}
        self.by_key: dict[int, tuple[RequestStats, ...]] = {}  # api key -> its stats

    def _stats(self, name: str) -> RequestStats:
        stats = self.by_name.get(name)
        if stats is None:
            stats = self.by_name[name] = RequestStats(name)
        return stats

    def stats_of(self, api_key: int) -> tuple[RequestStats, ...]:
        names = [api_name(api_key)] + (["FetchConsumer"] if api_key == FETCH_KEY else [])
        stats = self.by_key[api_key] = tuple(self._stats(n) for n in names)
        return stats

    def record(self, t: RequestTiming, response_dequeue_ns: int, end_ns: int) -> None:
        for s in self.by_key.get(t.api_key) or self.stats_of(t.api_key):
            _record_timing(s.cells, s.requests, t, response_dequeue_ns, end_ns)

    def record_sent(self, timings: Iterable[RequestTiming], dequeue_ns: int) -> None:
        """Responses handed to the socket together at ``dequeue_ns`` (one write)."""
        end = time.perf_counter_ns()
        by_key = self.by_key
        record = _record_timing
        for t in timings:  # record() inlined: once per request, one call per RequestStats
            for s in by_key.get(t.api_key) or self.stats_of(t.api_key):
                record(s.cells, s.requests, t, dequeue_ns, end)  # Fetch: FetchConsumer too

    def record_sent_one(self, t: RequestTiming, dequeue_ns: int) -> None:
        """``record_sent`` of one response (the common case: no list, no loop over it)."""
        end = time.perf_counter_ns()
        for s in self.by_key.get(t.api_key) or self.stats_of(t.api_key):
            _record_timing(s.cells, s.requests, t, dequeue_ns, end)

    def record_no_response(self, t: RequestTiming) -> None:
        """A request without a response (Produce acks=0)."""
        self.record(t, t.complete_ns, t.complete_ns)
