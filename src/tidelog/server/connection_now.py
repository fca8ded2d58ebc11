"""A connection's common requests in one call: the whole Produce frames a read starts with,
each answered on return by the native produce, their pre-encoded answers written together.

``ConnectionNow`` is a mixin of ``KafkaConnection`` (connection.py). ``_take_one`` stands for
``_take`` → ``_dispatch`` → ``_spawn`` → ``_flush`` for the Produce frames at the start of a
read when nothing else is going on (no answer queued, no bytes held over, no large frame
arriving, no SASL session, no fault plan, no quota mute, request metrics on): the same
handler calls, the same answer bytes (one write for the read, as ``_flush``'s), the same
request metrics. It takes nothing when that is not the case, stops at the first frame that
is not a whole Produce (another request, one still arriving, a version out of range, acks=0,
a frame the decode refuses) and leaves the read from there to the general steps; a frame
whose handler waits, declines, raises or asks for a throttle or a close is answered by
``_one_rest`` (after the answers before it are written), and the frames after it by the
general steps. Before ``handle_now`` each Produce goes to the native ``produce_one_now``
(produce_one.py), which answers it in one call or declines it, nothing done, to
``handle_now``; ``_start`` sends a Produce the general steps decoded there too
(``_produce_placed``: its answer into its slot).

Why several frames a read: a loop that falls behind its clients reads several at once, and a
busy machine makes it fall behind; 7-46% of the Produce frames of a live broker at 1,000
partitions came so (bench/path_probe, docs/operations.md, sitting H).

With the native core, ``take_one_now`` (_native/take_now.c) does ``_take_one``'s steps and
``_answer``'s in one call, these two methods its twin: the same tests in the same order, the
same attributes set, the same calls (the decode, ``produce_one_now``, the clock, the
transport's write or writelines, the request metrics, the pause). It returns what
``_take_one`` would, or None having done nothing (the twin then runs), or the tuple
``_one_rest`` goes on from once ``produce_one_now`` returned no answer's bytes. Why: the
Python around the native produce was some 40% of a common request's instructions
(docs/operations.md, sitting H).
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

_SIZE = struct.Struct(">i")  # a frame's size
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

    def _take_one(self, data: bytes | bytearray, end: int) -> int:
        """The whole Produce frames ``data[:end]`` starts with, while nothing else goes on
        (no answer queued, no bytes held, no mute, no session...), decoded and answered,
        their answers written together; where the frames it took end (0: none; the
        general steps, ``_take``, take the read from there)."""
        if take_one_now is not None:  # (the native call: where it ended, or its rest; None
            done = take_one_now(self, data, end)  # when it declined, nothing done)
            if done is not None:
                if type(done) is int:
                    return done
                self._one_rest(*done[:6])
                return done[6]  # type: ignore[no-any-return]
        if self.closed or self.closed_for_auth or self._flush_scheduled or self.slots or \
                self.buf or self._large is not None or self.session is not None or \
                self.faults is not None or self._muted_until or self.writer is None or \
                self.request_metrics is None:
            return 0
        answers: list[bytes] = []
        timings: list[RequestTiming] = []
        pos = 0
        spec: HandlerSpec | None = None
        while (size := _whole_produce(data, pos, end, self.max_frame)) >= 0:
            start_ns = _perf_ns()
            if spec is None:
                clock = self._clock  # (an attribute called as a method is a generic lookup)
                self.last_active = clock()
                get_spec = self.broker.registry.get  # (the dict's own get, as _clock)
                spec = get_spec(0)
                if spec is None or spec.handle_now is None:
                    break
            version = data[pos + 6] << 8 | data[pos + 7]
            hr = _decoded(data, pos, size, version) \
                if spec.min_version <= version <= spec.max_version else None
            if hr is None:  # (the general steps' then: they close on a refused frame)
                break
            header, request = hr
            self._flush_scheduled = True  # what the handler completes is flushed here
            timing = _new_timing(0, version, start_ns, _perf_ns(), start_ns)
            pos += 4 + size
            result: Any = None
            error: BaseException | None = None
            if produce_one_now is not None and spec.handle_now is handle_now:  # (produce_one)
                result, error = _produce(self, header, request)
                if type(result) is bytes and not self.closed:
                    timing.complete_ns = _perf_ns()
                    answers.append(result)
                    timings.append(timing)
                    continue
            if answers:
                _answer(self, answers, timings)
                self._flush_scheduled = True
            self._one_rest(spec, header, request, timing, result, error)
            return pos
        if answers:
            _answer(self, answers, timings)
        return pos

    def _one_rest(self, spec: HandlerSpec, header: Any, request: Any, timing: RequestTiming,
                  result: Any, error: BaseException | None) -> bool:
        """``_take_one``'s request from what ``produce_one_now`` returned or raised on (or
        None when it was not called): its context made, ``handle_now`` answering (the rest
        of an append made natively), then the answer written or given its slot."""
        ctx = self._context(header)
        result, error = _now_rest(spec, ctx, request, result, error)
        if error is not None:
            self._placed(timing, request, ctx, spec.handle, None, error)
        elif type(result) is bytes and not self.closed and not ctx.throttle_ms and \
                not ctx.close_reason:
            timing.complete_ns = _perf_ns()
            _answer(self, [result], [timing])
        else:
            self._placed(timing, request, ctx, spec.handle, result, None)
        return True

    def _produce_placed(self, spec: HandlerSpec, header: Any, request: Any,
                        start_ns: int) -> bool | None:
        """``_start``'s Produce (one of several frames of a read, or one ``_take_one`` left
        to the general steps) answered by ``produce_one_now`` into its slot, flushed with
        the others; None, nothing done, when its handler is not the one that call stands
        for (or acks=0): ``_start``'s steps then. What it returns: as ``_start``."""
        if produce_one_now is None or spec.handle_now is not handle_now or request.acks == 0:
            return None
        timing = _new_timing(0, header.api_version, start_ns, start_ns, start_ns) \
            if self.request_metrics else None
        slot = _new_slot(timing)
        self.slots.append(slot)
        if timing is not None:
            timing.dequeue_ns = _perf_ns()
        result, error = _produce(self, header, request)
        if type(result) is bytes and not self.closed:  # (``_now_ended``'s first case)
            self._last_produce = None
            if timing is not None:
                timing.complete_ns = _perf_ns()
            slot.data = result
            if not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)
            return True
        ctx = self._context(header)
        result, error = _now_rest(spec, ctx, request, result, error)
        self._outcome(slot, timing, request, ctx, spec.handle, result, error)
        return not self.closed

    def _context(self, header: Any) -> RequestContext:
        """A request's context on this connection."""
        listener = self.listener
        return _new_context(header, self.broker, self.peer[0], self.peer[1], None, 0,
                            self.principal, listener.name, listener.protocol, 0, None,
                            self.state)

    def _placed(self, timing: RequestTiming, request: Any, ctx: RequestContext,
                handle: Handler, result: Any, error: BaseException | None) -> None:
        """``_take_one``'s request given its answer slot (no answer was queued before it) and
        to the general steps: what its ``handle_now`` returned or raised, then the flush."""
        slot = _new_slot(timing)
        self.slots.append(slot)
        try:
            self._outcome(slot, timing, request, ctx, handle, result, error)
        finally:
            self._flush()

    def _outcome(self, slot: Slot, timing: RequestTiming | None, request: Any,
                 ctx: RequestContext, handle: Handler, result: Any,
                 error: BaseException | None) -> None:
        """A Produce's slot given what its ``handle_now`` returned or raised: its coroutine
        run, its handler started (it would not answer now), or its answer (``_spawn``'s)."""
        if type(result) is CoroutineType:  # its appends made: what they wait for
            self._begin(slot, request, ctx, result, timing)
        elif result is NOT_NOW:
            self._start_handler(slot, request, ctx, handle, timing)
        else:
            self._now_ended(slot, request, ctx, timing, result, error)

    def _answer(self, answers: list[bytes], timings: list[RequestTiming]) -> None:
        """``_take_one``'s pre-encoded answers written in one write (``_flush``'s first
        case when one, no slot): behind a file chunk that waits, else to the transport; then
        their request metrics and the pause."""
        self._last_produce = None
        self._flush_scheduled = False
        writer = self.writer
        sent_ns = _perf_ns()
        if writer.queue:  # type: ignore[union-attr]  # behind a file chunk that waits
            writer.write(answers)  # type: ignore[union-attr]
        else:
            try:
                if len(answers) == 1:
                    self.transport.write(answers[0])  # type: ignore[union-attr]
                else:
                    self.transport.writelines(answers)  # type: ignore[union-attr]
            except OSError as exc:
                writer.abort()  # type: ignore[union-attr]
                self._send_failed(exc)
        if self.closed:
            return
        metrics = self.request_metrics  # (``record_sent``'s steps inline: no call of its own)
        end_ns = _perf_ns()
        stats = metrics.by_key.get(0) or metrics.stats_of(0)  # type: ignore[union-attr]
        for timing in timings:
            for s in stats:
                _record_timing(s.cells, s.requests, timing, sent_ns, end_ns)
        if self._reading_paused or self._writing_paused or self._muted_until or \
                writer.queue or len(self.slots) + len(self._tasks) >= self.max_queued:  # type: ignore[union-attr]
            self._maybe_pause()


def _whole_produce(data: bytes | bytearray, pos: int, end: int, max_frame: int) -> int:
    """The size of the whole Produce frame at ``data[pos:end]`` (not a large one), or -1."""
    if end - pos < 12 or data[pos + 5] != PRODUCE_KEY or data[pos + 4] != 0:
        return -1
    (size,) = _SIZE.unpack_from(data, pos)
    if size < 8 or pos + 4 + size > end or size >= LARGE_FRAME or size > max_frame:
        return -1
    return size  # type: ignore[no-any-return]


def _decoded(data: bytes | bytearray, pos: int, size: int,
             version: int) -> tuple[Any, Any] | None:
    """The frame at ``data[pos:]`` cut (its one copy) and decoded: its header and request,
    or None when the decode refuses it or it asks for no answer (acks=0)."""
    piece = data[pos + 4:pos + 4 + size]  # a bytearray's slice is a bytearray: the one copy
    frame = memoryview(piece if type(piece) is bytearray else bytearray(piece))
    try:
        header, request = decode_produce_in_place(frame, version)
    except InvalidRequestError:
        return None
    return None if request.acks == 0 else (header, request)


def _produce(conn: ConnectionNow, header: Any,
             request: Any) -> tuple[Any, BaseException | None]:
    """``produce_one_now``'s answer (or what else it returned), or the exception it raised,
    as the handler's task keeps it."""
    try:
        return produce_one_now(conn.broker, conn.state, header, request), None  # type: ignore[misc]
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        return None, exc


def _now_rest(spec: HandlerSpec, ctx: RequestContext, request: Any, result: Any,
              error: BaseException | None) -> tuple[Any, BaseException | None]:
    """What ``produce_one_now`` left (None: declined; a tuple: appended, its end Python's)
    taken on by ``handle_now`` or ``answer_one_rest``: their result, or what they raised."""
    if error is None:
        try:
            if result is None:
                result = spec.handle_now(ctx, request)  # type: ignore[misc]
            elif type(result) is tuple:
                result = answer_one_rest(ctx, request, result)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # the handler's exception, as its task keeps it
            error = exc
    return result, error


# (called through the function: a method looked up on the connection, whose attributes are
# too many for its dict to share its keys, is a generic lookup each time)
_answer = ConnectionNow._answer


TAKE_ONE_ENV = "TIDELOG_TAKE_ONE"

# ``_take_one`` and ``_answer`` in one native call (_native/take_now.c; these two are its
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
