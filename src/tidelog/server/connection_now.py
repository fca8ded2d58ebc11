"""A connection's common request in one call: one complete Produce frame read, its handler's
``handle_now`` answering on return, its pre-encoded answer written at once.

``ConnectionNow`` is a mixin of ``KafkaConnection`` (connection.py). ``_take_one`` stands for
``_take`` → ``_dispatch`` → ``_spawn`` → ``_flush`` when a read holds exactly one Produce
frame and nothing else is going on (no answer queued, no bytes held over, no large frame
arriving, no SASL session, no fault plan, no quota mute, request metrics on): the same
handler calls, the same answer bytes, the same request metrics. It declines, before it has
done anything, whatever is not that case, and hands anything uncommon it meets once the frame
is cut (a version out of range, acks=0, a handler that waits, declines, raises or asks for a
throttle or a close) to the general steps, which answer it as they would have. Before
``handle_now`` the common Produce goes to the native ``produce_one_now`` (produce_one.py),
which answers it in one call or declines it, nothing done, to ``handle_now``.

With the native core, ``take_one_now`` (_native/take_now.c) does ``_take_one``'s steps and
``_answer_one``'s in one call, these two methods its twin: the same tests in the same order,
the same attributes set, the same calls (the decode, ``produce_one_now``, the clock, the
transport's write, the request metrics, the pause). It returns what ``_take_one`` would, or
None having done nothing (the twin then runs), or the tuple ``_one_rest`` goes on from once
``produce_one_now`` returned no answer's bytes. Why: the Python around the native produce
was some 40% of a common request's instructions (docs/operations.md, sitting H).
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from tidelog._native import core
from tidelog.metrics.requests import RequestMetrics, RequestTiming, record_timing
from tidelog.protocol.codec import InvalidRequestError
from tidelog.protocol.produce_in_place import decode_produce_in_place
from tidelog.util.slotted import slotted_maker

from .connection_outcomes import Slot
from .context import ConnectionState, RequestContext
from .produce_one import answer_one_rest, handle_now, produce_one_now
from .quota import request as request_quota
from .receive import LARGE_FRAME, LargeFrame
from .registry import NOT_NOW, Handler, HandlerSpec
from .security.types import KafkaPrincipal
from .sendfile import ResponseWriter

if TYPE_CHECKING:
    from .broker import Broker
    from .faults import FaultPlan
    from .security.session import ListenerSecurity, SaslSession

_SIZE_KEY_VERSION = struct.Struct(">ihh")  # a frame's size, its api key and version
PRODUCE_KEY = 0
_perf_ns = time.perf_counter_ns
_new_context = slotted_maker(RequestContext)
_new_slot = slotted_maker(Slot)
_new_timing = slotted_maker(RequestTiming)
_record_timing = record_timing


class ConnectionNow:
    broker: Broker
    listener: ListenerSecurity
    principal: KafkaPrincipal
    peer: tuple[str, int]
    state: ConnectionState
    closed: bool
    closed_for_auth: bool
    session: SaslSession | None
    faults: FaultPlan | None
    buf: bytearray
    _large: LargeFrame | None
    max_frame: int
    max_queued: int
    request_metrics: RequestMetrics | None
    transport: asyncio.Transport | None
    writer: ResponseWriter | None
    slots: deque[Slot]
    last_active: float
    _clock: Callable[[], float]
    _flush_scheduled: bool
    _reading_paused: bool
    _writing_paused: bool
    _muted_until: float
    _tasks: set[asyncio.Future[Any]]
    _last_produce: asyncio.Future[Any] | None

    def close(self, reason: str, *, graceful: bool = False) -> None:
        raise NotImplementedError  # the connection's

    def _flush(self) -> None:
        raise NotImplementedError  # the connection's

    def _maybe_pause(self) -> None:
        raise NotImplementedError  # the connection's

    def _send_failed(self, exc: OSError) -> None:
        raise NotImplementedError  # the connection's

    def _finished(self, slot: Slot | None, ctx: RequestContext, request: Any, result: Any,
                  error: BaseException | None) -> None:
        raise NotImplementedError  # the connection's

    def _dispatch(self, frame: bytes | memoryview) -> bool:
        raise NotImplementedError  # the connection's

    def _start(self, spec: HandlerSpec, header: Any, request: Any, start_ns: int) -> bool:
        raise NotImplementedError  # the connection's

    def _begin(self, slot: Slot | None, request: Any, ctx: RequestContext,
               coro: Awaitable[Any], timing: RequestTiming | None) -> None:
        raise NotImplementedError  # the connection's

    def _now_ended(self, slot: Slot | None, request: Any, ctx: RequestContext,
                   timing: RequestTiming | None, result: Any,
                   error: BaseException | None) -> None:
        """A ``handle_now`` that answered on return (or raised)."""
        if ctx.header.api_key == 0:
            self._last_produce = None
        if timing is not None:
            timing.complete_ns = time.perf_counter_ns()
            if slot is None:  # acks=0
                self.request_metrics.record_no_response(timing)  # type: ignore[union-attr]
        if type(result) is bytes and slot is not None and not self.closed and \
                not ctx.throttle_ms and not ctx.close_reason:
            slot.data = result  # (``_finished``, ``_complete``: a pre-encoded answer)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)
            return
        self._finished(slot, ctx, request, result, error)

    def _start_handler(self, slot: Slot | None, request: Any, ctx: RequestContext,
                       handle: Handler, timing: RequestTiming | None,
                       later: asyncio.Future[Any] | None = None) -> None:
        """The handler's coroutine started (after ``later``, a Produce still running)."""
        handle = request_quota.wrap(ctx, handle)  # request_percentage quotas (KIP-124)
        if later is not None:
            handle = _after(later, handle)
        # started now: a handler that never suspends (a small produce) is answered in this
        # turn of the loop, not behind everything queued (server/eager.py), and without a
        # future or a task
        self._begin(slot, request, ctx, handle(ctx, request), timing)

    def _take_one(self, data: bytes | bytearray, end: int) -> bool:
        """``data[:end]``, one whole Produce frame, framed, dispatched and answered; False
        (nothing done: ``_take``'s then) when it is not exactly one frame or something else
        waits (an answer queued, bytes held, a mute, a session...)."""
        if take_one_now is not None:  # (the native call: True, False or its rest; None
            done = take_one_now(self, data, end)  # when it declined, nothing done)
            if done is not None:
                return done if type(done) is bool else self._one_rest(*done)
        if self.closed or self.closed_for_auth or self._flush_scheduled or self.slots or \
                self.buf or self._large is not None or end < 12 or data[5] != PRODUCE_KEY or \
                data[4] != 0 or self.session is not None or self.faults is not None:
            return False
        size, _, version = _SIZE_KEY_VERSION.unpack_from(data, 0)
        writer = self.writer
        if size != end - 4 or size >= LARGE_FRAME or size > self.max_frame or \
                self._muted_until or writer is None or self.request_metrics is None:
            return False
        start_ns = _perf_ns()
        clock = self._clock  # (an attribute called as a method is a generic lookup)
        self.last_active = clock()
        piece = data[4:end]  # a bytearray's slice is a bytearray: the one copy out of it
        frame = memoryview(piece if type(piece) is bytearray else bytearray(piece))
        get_spec = self.broker.registry.get  # (the dict's own get, an attribute: as _clock)
        spec = get_spec(0)
        now = spec.handle_now if spec is not None else None
        if now is None or not spec.min_version <= version <= spec.max_version:  # type: ignore[union-attr]
            return self._general(frame, None, None, start_ns)
        try:
            header, request = decode_produce_in_place(frame, version)
        except InvalidRequestError as exc:
            self.close(f"invalid request: {exc}")
            return True
        if request.acks == 0:
            return self._general(header, request, spec, start_ns)
        self._flush_scheduled = True  # what the handler completes is flushed here
        timing = _new_timing(0, version, start_ns, _perf_ns(), start_ns)
        result = error = None
        if now is handle_now and produce_one_now is not None:  # (produce_one.py)
            try:
                result = produce_one_now(self.broker, self.state, header, request)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # the handler's exception, as its task keeps it
                error = exc
            else:
                if type(result) is bytes and not self.closed:
                    _answer_one(self, result, timing, writer)
                    return True
        return self._one_rest(spec, header, request, timing, result, error)  # type: ignore[arg-type]

    def _one_rest(self, spec: HandlerSpec, header: Any, request: Any, timing: RequestTiming,
                  result: Any, error: BaseException | None) -> bool:
        """``_take_one``'s request from what ``produce_one_now`` returned or raised on (or
        None when it was not called): its context made, ``handle_now`` answering (the rest
        of an append made natively), then the answer written or given its slot."""
        ctx = self._context(header)
        if error is None:
            try:
                if result is None:
                    result = spec.handle_now(ctx, request)  # type: ignore[misc]
                elif type(result) is tuple:  # appended, its end Python's
                    result = answer_one_rest(ctx, request, result)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # the handler's exception, as its task keeps it
                error = exc
        if error is not None:
            self._placed(timing, request, ctx, spec.handle, None, error)
        elif type(result) is bytes and not self.closed and not ctx.throttle_ms and \
                not ctx.close_reason:
            _answer_one(self, result, timing, self.writer)  # type: ignore[arg-type]
        else:
            self._placed(timing, request, ctx, spec.handle, result, None)
        return True

    def _context(self, header: Any) -> RequestContext:
        """A request's context on this connection."""
        listener = self.listener
        return _new_context(header, self.broker, self.peer[0], self.peer[1], None, 0,
                            self.principal, listener.name, listener.protocol, 0, None,
                            self.state)

    def _general(self, frame: Any, request: Any, spec: HandlerSpec | None,
                 start_ns: int) -> bool:
        """The frame ``_take_one`` cut, to ``_take``'s steps: dispatched (``request`` None) or,
        decoded (``frame`` its header then), started; then flushed."""
        self._flush_scheduled = True
        try:
            if request is None:
                self._dispatch(frame)
            else:
                self._start(spec, frame, request, start_ns)  # type: ignore[arg-type]
        finally:
            self._flush()
        return True

    def _placed(self, timing: RequestTiming, request: Any, ctx: RequestContext,
                handle: Handler, result: Any, error: BaseException | None) -> None:
        """``_take_one``'s request given its answer slot (no answer was queued before it) and
        to the general steps: what its ``handle_now`` returned or raised, then the flush."""
        slot = _new_slot(timing)
        self.slots.append(slot)
        try:
            if type(result) is CoroutineType:  # its appends made: what they wait for
                self._begin(slot, request, ctx, result, timing)
            elif result is NOT_NOW:
                self._start_handler(slot, request, ctx, handle, timing)
            else:
                self._now_ended(slot, request, ctx, timing, result, error)
        finally:
            self._flush()

    def _answer_one(self, answer: bytes, timing: RequestTiming, writer: ResponseWriter) -> None:
        """``_take_one``'s pre-encoded answer written (``_flush``'s first case, no slot)."""
        self._last_produce = None
        self._flush_scheduled = False
        sent_ns = timing.complete_ns = _perf_ns()
        if writer.queue:  # behind a file chunk that waits
            writer.write([answer])
        else:
            try:
                self.transport.write(answer)  # type: ignore[union-attr]
            except OSError as exc:
                writer.abort()
                self._send_failed(exc)
        if self.closed:
            return
        metrics = self.request_metrics  # (``record_sent_one`` inline: no call of its own)
        end_ns = _perf_ns()
        for s in metrics.by_key.get(0) or metrics.stats_of(0):  # type: ignore[union-attr]
            _record_timing(s.cells, s.requests, timing, sent_ns, end_ns)
        if self._reading_paused or self._writing_paused or self._muted_until or \
                writer.queue or len(self.slots) + len(self._tasks) >= self.max_queued:
            self._maybe_pause()


# (called through the function: a method looked up on the connection, whose attributes are
# too many for its dict to share its keys, is a generic lookup each time)
_answer_one = ConnectionNow._answer_one


TAKE_ONE_ENV = "TIDELOG_TAKE_ONE"

# ``_take_one`` and ``_answer_one`` in one native call (_native/take_now.c; these two are its
# twin): None when the native produce is not (produce_one.py) or ``TIDELOG_TAKE_ONE`` is 0.
# It calls this module's ``produce_one_now`` as it is at the call, as ``_take_one`` does.
take_one_now: Callable[[Any, Any, int], Any] | None = None
if core is not None and produce_one_now is not None and \
        os.environ.get(TAKE_ONE_ENV, "") != "0":
    core.take_now_bind(globals(), handle_now, decode_produce_in_place, _new_timing,
                       _record_timing, LARGE_FRAME)
    take_one_now = core.take_one_now


def _after(first: asyncio.Future[Any], handle: Handler) -> Handler:
    """``handle`` once ``first`` ended (whatever its outcome: that is its own response's)."""

    async def run(ctx: RequestContext, request: Any) -> Any:
        await asyncio.wait([first])
        return await handle(ctx, request)

    return run
