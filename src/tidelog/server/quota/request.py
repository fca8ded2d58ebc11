"""Kafka's ClientRequestQuotaManager (KIP-124): ``request_percentage`` bounds the time a
client's requests keep the broker busy, as a percentage of one request handler thread over
the quota window samples (50 = half a thread).

Kafka records ``requestThreadTimeNanos`` — the time a handler thread spent on the request,
not the time it waited in purgatory. Here the handlers are coroutines on the broker's loop, so
the handler's own time is the sum of the steps it ran on the loop (``_LocalTimer``), awaits
excluded. The rate is recorded in Kafka's units (nanos * 100 / 1e9 per second, so a client
holding a whole thread for a second records 100), the throttle is
``(rate - quota) / quota * window`` capped at one window (Kafka's maxThrottleTimeMs =
``quota.window.size.seconds``), carried in the response's throttle_time_ms (the larger of this
and a byte-rate throttle, as Kafka's produce and fetch answer) and enforced by muting the
connection for as long (KIP-219).

Exempt, as in Kafka: the inter-broker (cluster action) APIs, answered with
sendResponseExemptThrottle, and ApiVersions / SaslHandshake / SaslAuthenticate, which Kafka's
SaslServerAuthenticator answers in the network thread before KafkaApis sees the client.

``wrap(ctx, handle)`` is called by the connection for every request; with no
``request_percentage`` quota anywhere, or none for this client, it returns ``handle`` itself
(no cost beyond a flag check, and the quota lookup once some client has one).
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from .manager import ClientQuotaManager, QuotaType

if TYPE_CHECKING:
    from ..context import RequestContext

NANOS_TO_PERCENTAGE = 100.0 / 1_000_000_000  # Kafka's NanosToPercentagePerSecond

# ApiVersions, SaslHandshake, SaslAuthenticate, and the APIs Kafka's ApiKeys marks
# clusterAction (inter-broker and controller RPCs: LeaderAndIsr .. ControlledShutdown,
# WriteTxnMarkers, the KRaft quorum RPCs, AlterPartition, UpdateFeatures, Envelope, broker
# registration and heartbeat, AllocateProducerIds); none of the latter is served here today
EXEMPT_API_KEYS = frozenset(
    {18, 17, 36, 4, 5, 6, 7, 27, 52, 53, 54, 55, 56, 57, 58, 62, 63, 67}
)

Handler = Callable[[Any, Any], Awaitable[Any]]

_CURRENT: contextvars.ContextVar[_LocalTimer | None] = contextvars.ContextVar(
    "tidelog_request_timer", default=None
)


class _LocalTimer:
    """Drives a handler coroutine and adds up the time each of its steps runs (the loop
    resumes it after every await); ``recorded`` once its time went into the rate."""

    __slots__ = ("coro", "local_ns", "recorded", "step_start")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.local_ns = 0
        self.step_start = 0
        self.recorded = False

    def so_far_ns(self) -> int:
        running = time.perf_counter_ns() - self.step_start if self.step_start else 0
        return self.local_ns + running

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            self.step_start = start = time.perf_counter_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.local_ns += time.perf_counter_ns() - start
                self.step_start = 0
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go to the handler
                value, error = None, exc


def _request_quotas(broker: object) -> ClientQuotaManager | None:
    """The broker's quota manager when it holds a request quota, else None."""
    mgr: ClientQuotaManager | None = getattr(broker, "client_quotas", None)
    return mgr if mgr is not None and mgr.store.has_request_quota else None


def wrap(ctx: RequestContext, handle: Handler) -> Handler:
    """``handle`` timed and throttled under request quotas; ``handle`` itself when no
    request quota exists or the API is exempt."""
    quotas = None if ctx.header.api_key in EXEMPT_API_KEYS else _request_quotas(ctx.broker)
    if quotas is None:
        return handle
    bound, _ = quotas.quota(
        QuotaType.REQUEST, ctx.principal.name, ctx.client_id or "")
    if bound == float("inf"):  # this client has none: nothing to record it against
        return handle

    async def timed(ctx: Any, request: Any) -> Any:
        timer = _LocalTimer(handle(ctx, request))  # type: ignore[arg-type]
        _CURRENT.set(timer)  # this task's context: the handler's request_throttle sees it
        result = await timer
        request_throttle(ctx)
        if ctx.throttle_ms > 0:
            result = _with_throttle(result, ctx.throttle_ms)
        return result

    return timed


def _with_throttle(result: Any, ms: int) -> Any:
    """A kio response with its throttle_time raised to ``ms`` (every response but the SASL
    ones has one: kio's timedelta ``throttle_time``); pre-encoded responses as they are."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return result
    current = getattr(result, "throttle_time", None)
    wanted = datetime.timedelta(milliseconds=ms)
    if not isinstance(current, datetime.timedelta) or current >= wanted:
        return result
    return dataclasses.replace(result, throttle_time=wanted)


def request_throttle(ctx: RequestContext) -> int:
    """Record the current request's handler time so far (once) and return its throttle in
    ms; the handlers that encode their own responses (Produce, Fetch) call this just before
    encoding, as Kafka records at sendResponse. 0 when the request is not timed."""
    timer = _CURRENT.get()
    if timer is None or timer.recorded:
        return 0
    timer.recorded = True
    now_ms = int(ctx.broker.clock.milliseconds())
    quotas = ctx.broker.client_quotas
    assert quotas is not None  # wrap() found a request quota in it
    ms = quotas.record(
        QuotaType.REQUEST, ctx.principal.name, ctx.client_id or "",
        timer.so_far_ns() * NANOS_TO_PERCENTAGE, now_ms)
    if ms > 0:  # the connection mutes itself for as long once it has answered (KIP-219)
        ctx.throttle_ms = max(ctx.throttle_ms, ms)
    return ms
