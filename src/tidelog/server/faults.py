"""Faults on demand: a plan of failures a running broker injects into its own answers, so a
test proves its client's retry, timeout and exactly-once logic against a real broker.

A ``FaultPlan`` is armed from any thread, before the broker starts or while it runs; each
fault fires a fixed number of times, in request order, and is then spent (no randomness, no
timing windows). The connection consults it for every request (``install`` ties a plan to a
broker; a broker with no plan pays one dictionary lookup per connection):

* ``fail_produce(topic, partition, error, times)``: the next ``times`` Produce requests that
  carry the partition answer it with ``error`` (nothing is appended for it); the other
  partitions of the same request are appended and answered as usual;
* ``fail_requests(api_key, error, times)``: the next ``times`` requests of that API are
  answered with ``error`` in every error field (top level or per item, as Kafka answers a
  request it could not handle) without being handled;
* ``delay_responses(api_key, ms, times)``: requests of that API are handled, then answered
  ``ms`` later (later responses on the same connection wait behind, as Kafka's in-order
  responses do);
* ``drop_connection_after(requests, api_key)``: the first connection that sends that many
  more requests (of that API, or of any) is closed when its next one arrives, unanswered (each
  connection counts its own, so a client's other connections do not change the count);
* ``advance_clock(ms)``: the broker's clock (``ShiftedClock``) jumps forward: retention,
  segment roll, transaction and group expiry see the new time;
* ``fill_log_dir(path, free_bytes=None)`` / ``free_log_dir(path)``: the dir reads as having
  ``free_bytes`` free (None: one byte below its ``log.dir.min.free.bytes`` floor, above the
  coordinators' reserve), so the broker degrades as it would on a full disk, and recovers
  once it is freed.

``injected`` lists what fired, for a test to assert on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.serial import entity_reader

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.free_space import JUST_BELOW_FLOOR
from tidelog.util.clock import SYSTEM_CLOCK, Clock

from .error_response import error_response
from .fault_plans import PLANS
from .fault_plans import plan_for as plan_for  # its old home

if TYPE_CHECKING:
    from .broker import Broker
    from .context import RequestContext

PRODUCE_KEY = 0
TOPIC_ID_VERSION = 13
Handler = Callable[["RequestContext", Any], Awaitable[Any]]


class ShiftedClock:
    """The system clock plus an offset a test moves forward (``advance``)."""

    def __init__(self, base: Clock = SYSTEM_CLOCK) -> None:
        self._base = base
        self._offset_ms = 0

    def milliseconds(self) -> int:
        return self._base.milliseconds() + self._offset_ms

    def nanoseconds(self) -> int:
        return self._base.nanoseconds() + self._offset_ms * 1_000_000

    def sleep(self, ms: int) -> None:
        self._base.sleep(ms)

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("the clock only moves forward")
        self._offset_ms += ms


@dataclasses.dataclass(frozen=True)
class InjectedFault:
    kind: str  # "produce", "request", "delay", "drop"
    api_key: int
    detail: str


@dataclasses.dataclass
class _ProduceFault:
    topic: str
    partition: int
    error: ErrorCode
    remaining: int


@dataclasses.dataclass
class _RequestFault:
    api_key: int
    error: ErrorCode
    remaining: int


@dataclasses.dataclass
class _Delay:
    api_key: int
    ms: int
    remaining: int | None  # None: every request of the API


@dataclasses.dataclass
class _Drop:
    api_key: int | None
    requests: int
    seen: dict[int, int] = dataclasses.field(default_factory=dict)  # connection -> count


class FaultPlan:
    """Failures to inject, each a fixed number of times (see the module's docstring)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = ShiftedClock(clock)
        self.injected: list[InjectedFault] = []
        self._lock = threading.Lock()
        self._produce: list[_ProduceFault] = []
        self._requests: list[_RequestFault] = []
        self._delays: list[_Delay] = []
        self._drops: list[_Drop] = []
        self._full_dirs: dict[Path, int] = {}

    # -- arming (any thread) ------------------------------------------------------------------
    def fail_produce(
        self,
        topic: str,
        partition: int = 0,
        error: ErrorCode | int = ErrorCode.NOT_LEADER_OR_FOLLOWER,
        times: int = 1,
    ) -> FaultPlan:
        with self._lock:
            self._produce.append(_ProduceFault(topic, partition, ErrorCode(error), times))
        return self

    def fail_requests(self, api_key: int, error: ErrorCode | int, times: int = 1) -> FaultPlan:
        with self._lock:
            self._requests.append(_RequestFault(api_key, ErrorCode(error), times))
        return self

    def delay_responses(self, api_key: int, ms: int, times: int | None = None) -> FaultPlan:
        with self._lock:
            self._delays.append(_Delay(api_key, ms, times))
        return self

    def drop_connection_after(self, requests: int, api_key: int | None = None) -> FaultPlan:
        with self._lock:
            self._drops.append(_Drop(api_key, requests))
        return self

    def advance_clock(self, ms: int) -> FaultPlan:
        self.clock.advance(ms)
        return self

    def fill_log_dir(self, path: str | Path, free_bytes: int | None = None) -> FaultPlan:
        with self._lock:
            free = JUST_BELOW_FLOOR if free_bytes is None else free_bytes
            self._full_dirs[Path(path).resolve()] = free
        return self

    def free_log_dir(self, path: str | Path) -> FaultPlan:
        with self._lock:
            self._full_dirs.pop(Path(path).resolve(), None)
        return self

    def clear(self) -> None:
        """Disarm every fault not yet spent (the clock keeps its offset)."""
        with self._lock:
            self._produce.clear()
            self._requests.clear()
            self._delays.clear()
            self._drops.clear()
            self._full_dirs.clear()

    @property
    def pending(self) -> int:
        """Faults armed and not yet spent (a delay for every request counts as one)."""
        with self._lock:
            faults = self._produce, self._requests, self._delays, self._drops
            return sum(len(f) for f in faults)

    # -- consulted by the broker --------------------------------------------------------------
    def free_bytes_override(self, path: Path) -> int | None:
        """The free bytes of a dir the plan filled, else None (its real free space applies)."""
        with self._lock:
            return self._full_dirs.get(path.resolve())

    def drops(self, api_key: int, connection: int) -> bool:
        """Whether ``connection`` (any key unique among open connections) is to be closed,
        leaving this request unanswered."""
        with self._lock:
            for drop in self._drops:
                if drop.api_key is None or drop.api_key == api_key:
                    seen = drop.seen.get(connection, 0)
                    if seen < drop.requests:
                        drop.seen[connection] = seen + 1
                        continue
                    self._drops.remove(drop)
                    self.injected.append(InjectedFault("drop", api_key, "connection closed"))
                    return True
        return False

    def wrap(self, api_key: int, handle: Handler) -> Handler:
        """``handle``, or ``handle`` with this plan's faults around it."""
        with self._lock:
            delay = self._take_delay(api_key)
            error = self._take_request_fault(api_key)
            produce = api_key == PRODUCE_KEY and bool(self._produce)
        if error is not None:
            handle = _failing(api_key, error)
        elif produce:
            handle = _failing_produce(self, handle)
        if delay:
            handle = _delayed(handle, delay)
        return handle

    def _take_request_fault(self, api_key: int) -> ErrorCode | None:
        for f in self._requests:
            if f.api_key == api_key:
                f.remaining -= 1
                if f.remaining <= 0:
                    self._requests.remove(f)
                self.injected.append(InjectedFault("request", api_key, f.error.name))
                return f.error
        return None

    def _take_delay(self, api_key: int) -> int:
        for d in self._delays:
            if d.api_key != api_key:
                continue
            if d.remaining is not None:
                d.remaining -= 1
                if d.remaining <= 0:
                    self._delays.remove(d)
            self.injected.append(InjectedFault("delay", api_key, f"{d.ms} ms"))
            return d.ms
        return 0

    def take_produce_faults(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """The error each faulted partition of one Produce request answers (spends them)."""
        out: dict[tuple[str, int], ErrorCode] = {}
        with self._lock:
            for tp in partitions:
                for f in self._produce:
                    if (f.topic, f.partition) == tp and tp not in out:
                        out[tp] = f.error
                        f.remaining -= 1
                        if f.remaining <= 0:
                            self._produce.remove(f)
                        detail = f"{tp[0]}-{tp[1]}: {f.error.name}"
                        self.injected.append(InjectedFault("produce", PRODUCE_KEY, detail))
                        break
        return out


def install(broker: Broker, plan: FaultPlan) -> None:
    """Tie ``plan`` to ``broker``: its connections inject the plan's faults, and its log dirs
    read the free space the plan says for the dirs it filled. (Give the broker ``plan.clock``
    when building it for ``advance_clock`` to move its time.)"""
    PLANS[broker] = plan
    broker.replica_manager.logs.free_space.override = plan.free_bytes_override

def _delayed(handle: Handler, ms: int) -> Handler:
    async def delayed(ctx: RequestContext, request: Any) -> Any:
        result = await handle(ctx, request)
        await asyncio.sleep(ms / 1000)
        return result

    return delayed


def _failing(api_key: int, error: ErrorCode) -> Handler:
    async def failing(ctx: RequestContext, request: Any) -> Any:
        return error_response(api_key, ctx.api_version, request, error)

    return failing


def _topic_name(ctx: RequestContext, t: Any) -> str:
    if ctx.api_version < TOPIC_ID_VERSION:
        return str(t.name)
    info = ctx.broker.replica_manager.store.topic_by_id(t.topic_id)
    return info.name if info is not None else ""


def _failing_produce(plan: FaultPlan, handle: Handler) -> Handler:
    async def failing(ctx: RequestContext, request: Any) -> Any:
        names = [_topic_name(ctx, t) for t in request.topic_data]
        asked = [(n, p.index) for n, t in zip(names, request.topic_data, strict=True)
                 for p in t.partition_data]
        failed = plan.take_produce_faults(asked)
        if not failed:
            return await handle(ctx, request)
        rest = _without(request, names, failed)
        result = await handle(ctx, rest) if rest.topic_data else None
        if request.acks == 0:
            ctx.close_reason = ctx.close_reason or "acks=0 produce failed (fault plan)"
            return None
        return _merged(ctx, request, names, failed, result)

    return failing


def _without(request: Any, names: list[str], failed: dict[tuple[str, int], ErrorCode]) -> Any:
    topics = []
    for name, t in zip(names, request.topic_data, strict=True):
        parts = tuple(p for p in t.partition_data if (name, p.index) not in failed)
        if parts:
            topics.append(dataclasses.replace(t, partition_data=parts))
    return dataclasses.replace(request, topic_data=tuple(topics))


def _merged(
    ctx: RequestContext, request: Any, names: list[str],
    failed: dict[tuple[str, int], ErrorCode], result: Any,
) -> Any:
    """The whole request's answer: the injected errors, the handler's answer for the rest."""
    answered: dict[tuple[str, int], Any] = {}
    real: Any = _decoded(ctx, result) if result is not None else None
    for name, t in zip(names, request.topic_data, strict=True):
        rt = next((r for r in real.responses if _same_topic(ctx, r, t)), None) if real else None
        for pr in rt.partition_responses if rt is not None else ():
            answered[(name, pr.index)] = pr
    # a failed item's shape (offsets -1) mirroring the request, as a failed handler answers
    shape: Any = error_response(PRODUCE_KEY, ctx.api_version, request, ErrorCode.NONE)
    topics = []
    for name, tr in zip(names, shape.responses, strict=True):
        parts = tuple(
            dataclasses.replace(pr, error_code=failed[(name, pr.index)])
            if (name, pr.index) in failed else answered[(name, pr.index)]
            for pr in tr.partition_responses
        )
        topics.append(dataclasses.replace(tr, partition_responses=parts))
    return dataclasses.replace(real if real is not None else shape, responses=tuple(topics))


def _same_topic(ctx: RequestContext, response_topic: Any, request_topic: Any) -> bool:
    if ctx.api_version < TOPIC_ID_VERSION:
        return bool(response_topic.name == request_topic.name)
    return bool(response_topic.topic_id == request_topic.topic_id)


def _decoded(ctx: RequestContext, result: Any) -> Any:
    """A handler's answer as a response object (the produce handler encodes its own)."""
    if not isinstance(result, bytes | bytearray):
        return result
    cls = response_class(PRODUCE_KEY, ctx.api_version)
    offset = 4 + (5 if cls.__header_schema__.__version__ >= 1 else 4)  # size, header
    obj, _ = entity_reader(cls)(bytes(result), offset)
    return obj
