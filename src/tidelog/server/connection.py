"""One client connection: framing, dispatch, responses in request order.

An ``asyncio.BufferedProtocol``: the transport reads into the buffer ``get_buffer`` hands it
(the loop thread's shared read buffer, or the rest of a large frame's own buffer, so its
bytes are received straight into place), and each ``buffer_updated`` call splits every
complete frame, starts its handler, and the responses that are ready are flushed together
with one ``writelines`` (one socket write per read batch). Responses leave strictly in request order
(kafka-python checks correlation ids in order); a Produce with acks=0 has no response slot.
Frames over ``socket.request.max.bytes`` and undecodable frames close this connection only; a
handler that fails is answered with UNKNOWN_SERVER_ERROR (error_response.py), as Kafka does.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from tidelog.metrics.requests import CURRENT_REQUEST, RequestTiming
from tidelog.protocol.codec import (
    API_VERSIONS_KEY,
    InvalidRequestError,
    UnsupportedVersionError,
    api_versions_fallback,
    decode_request,
    encode_response,
    peek_header,
)
from tidelog.protocol.fetch_request import decode_sessionless_fetch
from tidelog.protocol.produce_in_place import decode_produce_in_place
from tidelog.util.slotted import slotted_maker

from . import eager
from .connection_now import ConnectionNow
from .connection_outcomes import PENDING as _PENDING
from .connection_outcomes import ConnectionOutcomes, Slot
from .context import ConnectionState, RequestContext
from .fault_plans import plan_for
from .receive import LARGE_FRAME, PRODUCE_IN_PLACE, LargeFrame, read_buffer
from .registry import NOT_NOW, Handler, HandlerNow, HandlerSpec
from .security.scram import SaslAuthenticationError
from .security.session import ListenerSecurity, SaslSession
from .security.types import ANONYMOUS, KafkaPrincipal
from .sendfile import ResponseWriter, close_chunks

if TYPE_CHECKING:
    from .broker import Broker
    from .faults import FaultPlan

log = logging.getLogger(__name__)
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
PRODUCE_KEY = 0
FETCH_KEY = 1
_NUMBERS = itertools.count(1)
# (one of each per request: made without their Python __init__)
_new_context = slotted_maker(RequestContext)
_new_slot = slotted_maker(Slot)
_new_timing = slotted_maker(RequestTiming)


def _decode(frame: bytes | memoryview, key: int, version: int) -> tuple[Any, Any]:
    if key == FETCH_KEY:  # a consumer's sessionless Fetch in columns (protocol/fetch_request)
        columns = decode_sessionless_fetch(frame, version)
        if columns is not None:
            return columns
    if isinstance(frame, memoryview):  # a large frame (LargeFrame)
        if key == PRODUCE_KEY:  # its records stay views of the frame: no copy at all
            return decode_produce_in_place(frame, version)
        return decode_request(frame.toreadonly())  # kio's native reader wants read-only
    return decode_request(frame)


class KafkaConnection(ConnectionNow, ConnectionOutcomes, asyncio.BufferedProtocol):
    def __init__(self, broker: Broker, listener: ListenerSecurity | None = None) -> None:
        self.broker = broker
        self.listener = listener or ListenerSecurity("PLAINTEXT", "PLAINTEXT")
        # SASL listeners: only ApiVersions/SaslHandshake/SaslAuthenticate until authenticated
        self.session = (
            SaslSession(self.listener, broker.credentials) if self.listener.sasl else None
        )
        self.principal: KafkaPrincipal = ANONYMOUS
        self.closed_for_auth = False  # failed raw-token SASL: closing after the delay
        self.max_frame = int(broker.config.values["socket.request.max.bytes"])
        self.max_queued = int(broker.config.values["queued.max.requests"])
        # Kafka's RequestMetrics, recorded here only (None: not recorded)
        self.request_metrics = getattr(broker, "request_metrics", None)
        self.transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop it was made on
        self._clock: Callable[[], float] = time.monotonic  # that loop's time()
        self.writer: ResponseWriter | None = None  # the responses' bytes (server/sendfile.py)
        self.buf = bytearray()  # the start of a frame still arriving (not a large one)
        self._large: LargeFrame | None = None  # a large frame still arriving
        # what the transport reads into otherwise
        self._read_buffer, self._read_view, self._head_view = read_buffer()
        self._after_large = False  # the last read completed a large frame
        self.slots: deque[Slot] = deque()
        self.peer: tuple[str, int] = ("", 0)
        self.closed = False
        self._flush_scheduled = False
        self._reading_paused = False
        self._writing_paused = False
        self._muted_until = 0.0  # loop time until which a quota throttle mutes reading
        self.state = ConnectionState()  # what this connection's requests share
        self.last_active = 0.0
        self._tasks: set[asyncio.Future[Any]] = set()
        # the last Produce: a later request of another API waits for it, as behind Kafka's
        # muted channel (it sees what the produce wrote; its bytes may be written off the loop)
        self._last_produce: asyncio.Future[Any] | None = None
        self._closing: asyncio.Future[None] | None = None  # a close waiting for earlier requests
        self.faults: FaultPlan | None = plan_for(broker)  # faults on demand (tests only)
        self.number = next(_NUMBERS)  # unique in the process, unlike id() of a closed one

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.writer = ResponseWriter(self.transport, self._maybe_pause,  # type: ignore[arg-type]
                                     self._send_failed)
        self._loop = loop = asyncio.get_running_loop()
        # asyncio's loop.time() is time.monotonic() behind a Python call: called directly
        if type(loop).time is not asyncio.BaseEventLoop.time:
            self._clock = loop.time  # uvloop's (native)
        self.last_active = loop.time()
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        if self.listener.protocol == "SSL":  # asyncio calls this after the TLS handshake
            try:
                self.principal = self.listener.ssl_principal(transport.get_extra_info("peercert"))
            except ValueError as exc:  # no ssl.principal.mapping.rules rule applies
                self.broker.connections.add(self)
                self.close(str(exc))
                return
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self.writer is not None:
            self.writer.abort()
        for task in list(self._tasks):
            task.cancel()
        for slot in self.slots:  # responses never sent may hold segment fds
            if isinstance(slot.data, list):
                close_chunks(slot.data)
        self.slots.clear()

    def pause_writing(self) -> None:
        # The client reads slower than we answer: stop reading requests until it catches up.
        self._writing_paused = True
        self._maybe_pause()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._maybe_pause()

    @property
    def idle(self) -> bool:
        return not self.slots and not self._tasks

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport reads to: the rest of a large frame arriving, else the
        thread's read buffer (``buffer_updated`` follows before any other read); right after
        a large frame only its head (receive.HEAD_READ), in case another one follows."""
        large = self._large
        if large is not None and large.filled < large.size:
            return large.rest()
        return self._head_view if self._after_large else self._read_view

    def buffer_updated(self, nbytes: int) -> None:
        large = self._large
        if large is not None:  # received straight into the frame's place
            large.filled += nbytes
            if large.filled < large.size:
                self.last_active = self._clock()
                return
            self._after_large = True
            self._take(b"", 0)
        else:
            self._after_large = False
            pos = self._take_one(self._read_buffer, nbytes)  # (connection_now.py)
            if pos < nbytes:
                self._take(self._read_buffer, nbytes, pos)

    def data_received(self, data: bytes) -> None:
        """Bytes read elsewhere (and the ones held while muted): as if received."""
        pos = self._take_one(data, len(data))
        if pos < len(data) or not data:
            self._take(data, len(data), pos)

    def _take(self, data: bytes | bytearray, end: int, start: int = 0) -> None:
        """Frame and dispatch ``data[start:end]``; ``data`` may be the shared read buffer, of
        which nothing is kept past this call. What completes meanwhile goes out with one
        flush at the end (which pauses or resumes reading as needed)."""
        if self.closed or self.closed_for_auth:
            return
        already = self._flush_scheduled
        self._flush_scheduled = True
        try:
            clock = self._clock  # (an attribute called as a method is a generic lookup)
            self.last_active = clock()
            buf: bytes | bytearray = data  # (nothing held over: frames cut straight from it)
            pos = start
            if self._large is not None or self.buf:
                held = self._held(data, start, end)
                if held is None:
                    return
                buf, end = held
                pos = 0
            while end - pos >= 4:
                (size,) = _I32.unpack_from(buf, pos)
                if size < 0 or size > (self.max_frame if self.session is None else
                                       self._frame_cap()):
                    self._refuse(self._oversize_reason(size, pos, bytes(buf[pos : pos + 4])))
                    return
                if self._muted_until:  # a quota throttle: later requests wait until it ends
                    break
                # a Produce of an authenticated session (a SASL token is never in place)
                in_place = size >= LARGE_FRAME or (
                    end - pos >= 6 and buf[pos + 4] == 0 and buf[pos + 5] == PRODUCE_KEY
                    and (self.session is None or self.session.complete))
                if end - pos - 4 < size:
                    if in_place and size >= PRODUCE_IN_PLACE:
                        self._large = LargeFrame(size, buf, pos + 4, end)
                        pos = end
                    break
                if in_place:  # a bytearray's slice is a bytearray: the one copy out of it
                    piece = buf[pos + 4 : pos + 4 + size]
                    frame: bytes | memoryview = memoryview(
                        piece if type(piece) is bytearray else bytearray(piece))  # writable
                else:
                    with memoryview(buf) as mv:  # one copy out of the read buffer, not two
                        frame = bytes(mv[pos + 4 : pos + 4 + size])
                pos += 4 + size
                if not self._dispatch(frame):
                    return
            self._keep_rest(buf, pos, end)
        finally:
            if not already:
                self._flush()  # which ends by pausing or resuming reading as needed
            else:
                self._maybe_pause()

    def _keep_rest(self, buf: bytes | bytearray, pos: int, end: int) -> None:
        """After framing ``buf[:end]`` up to ``pos``: what is left held for the next read
        (copied out when ``buf`` was read straight from the transport's data)."""
        if buf is not self.buf:
            if pos < end:
                with memoryview(buf) as mv:
                    self.buf += mv[pos:end]
        elif pos:
            del self.buf[:pos]

    def _held(self, data: bytes | bytearray, start: int,
              end: int) -> tuple[bytearray, int] | None:
        """``_take``'s bytes while a large frame arrives or bytes are held over: the large
        frame fed (and dispatched once whole), what follows added to the bytes held; those
        to frame, or None (nothing to frame now)."""
        rest: memoryview | None = None
        if self._large is not None:
            with memoryview(data) as mv:
                rest = self._large.feed(mv[start:end])
            if rest is None:
                return None  # the large frame is still arriving
            large, self._large = self._large.frame(), None
            if not self._dispatch(large):
                return None
            del large  # the decoded request holds what it needs: free the frame now
        if rest is None:
            with memoryview(data) as mv:
                self.buf += mv[start:end]
        else:
            self.buf += rest
        return self.buf, len(self.buf)

    def _frame_cap(self) -> int:
        if self.session is not None and not self.session.complete:
            return min(self.max_frame, self.listener.max_receive_size)
        return self.max_frame

    def _oversize_reason(self, size: int, pos: int, head: bytes) -> str:
        if head[:2] == b"\x16\x03":  # a TLS ClientHello record header read as a frame size
            return f"TLS handshake on the {self.listener.protocol} listener {self.listener.name}"
        limit = "sasl.server.max.receive.size" if self._frame_cap() < self.max_frame else (
            "socket.request.max.bytes"
        )
        return (
            f"frame size {size} at byte {pos} exceeds {limit} ({self._frame_cap()}) "
            "or is negative"
        )

    # -- dispatch -----------------------------------------------------------------------------
    def _dispatch(self, frame: bytes | memoryview) -> bool:
        if self.session is not None and self.session.raw_tokens and not self.session.complete:
            return self._raw_sasl_token(bytes(frame))
        start_ns = time.perf_counter_ns()
        try:
            if len(frame) < 8:
                peek_header(frame)  # which says so
            key, version, corr = _HEADER.unpack_from(frame, 0)
            # (the registry's ``get``, an attribute read before its call: a method call's
            # lookup of an instance attribute is generic in 3.11)
            get = self.broker.registry.get
            spec = get(key)
            if spec is None:
                raise InvalidRequestError(f"unknown API key {key}")
            if not spec.min_version <= version <= spec.max_version:
                if key == API_VERSIONS_KEY:  # KIP-511: answer in v0 so the client can retry
                    slot = _new_slot()
                    slot.data = api_versions_fallback(corr, spec.min_version, spec.max_version)
                    self.slots.append(slot)
                    return True
                raise UnsupportedVersionError(key, version)
            if self.session is not None and not self.session.allows(key):
                raise InvalidRequestError(
                    f"API key {key} not expected in SASL state {self.session.state}"
                )
            if key == PRODUCE_KEY and type(frame) is memoryview:  # (_decode's first case)
                header, request = decode_produce_in_place(frame, version)
            else:
                header, request = _decode(frame, key, version)
        except InvalidRequestError as exc:
            self._refuse(f"invalid request: {exc}")
            return False
        return self._start(spec, header, request, start_ns)

    def _start(self, spec: HandlerSpec, header: Any, request: Any, start_ns: int) -> bool:
        """A decoded request's context, timing and answer slot made, its handler started."""
        key = header.api_key
        session = self.session
        if key == PRODUCE_KEY and session is None and self.faults is None:
            placed = self._produce_placed(spec, header, request, start_ns)  # (connection_now)
            if placed is not None:
                return placed
        principal = session.principal if session is not None and session.principal else (
            self.principal
        )
        listener = self.listener
        # (positional, in the fields' order: keywords cost half as much again per request)
        ctx = _new_context(header, self.broker, self.peer[0], self.peer[1], None, 0,
                           principal, listener.name, listener.protocol, 0, session, self.state)
        handle = spec.handle if self.faults is None else self._with_faults(key, spec.handle)
        if handle is None:
            return False
        timing = _new_timing(key, header.api_version, start_ns, start_ns, start_ns) \
            if self.request_metrics else None
        now = spec.handle_now if self.faults is None else None
        if key == 0 and getattr(request, "acks", 1) == 0:
            self._spawn(None, request, ctx, handle, timing, now)
            return not self.closed
        slot = _new_slot(timing)
        self.slots.append(slot)
        self._spawn(slot, request, ctx, handle, timing, now)
        return not self.closed  # a handler that ran to its end may have closed it

    def _with_faults(self, key: int, handle: Handler) -> Handler | None:
        """``handle`` with the fault plan's faults around it; None once the plan dropped this
        connection (the request is left unanswered, as when a broker goes away)."""
        assert self.faults is not None
        if self.faults.drops(key, self.number):
            self.close(f"fault plan: dropped before answering API {key}")
            return None
        return self.faults.wrap(key, handle)

    def _raw_sasl_token(self, frame: bytes) -> bool:
        """After a SaslHandshake v0 the SASL tokens travel as bare size-prefixed frames
        (Kafka's pre-KIP-152 flow, still used by librdkafka < 1.0 feature detection)."""
        session = self.session
        assert session is not None
        try:
            challenge = session.authenticate(frame)
        except SaslAuthenticationError as exc:
            # no error frame exists in this flow: close after the failed-auth delay
            self.closed_for_auth = True
            delay = self.listener.failed_auth_delay_ms / 1000
            asyncio.get_running_loop().call_later(
                delay, self.close, f"SASL authentication failed: {exc}"
            )
            return False
        slot = _new_slot()
        slot.data = _I32.pack(len(challenge)) + challenge
        self.slots.append(slot)
        return True

    def _spawn(
        self,
        slot: Slot | None,
        request: Any,
        ctx: RequestContext,
        handle: Callable[[RequestContext, Any], Awaitable[Any]],
        timing: RequestTiming | None = None,
        now: HandlerNow | None = None,
    ) -> None:
        produce = ctx.header.api_key == 0
        last = self._last_produce
        later = not produce and last is not None and not last.done()
        if timing is not None:  # (metrics.requests.begin_request inlined: once per request)
            timing.dequeue_ns = time.perf_counter_ns()
        if now is not None and not later:  # the handler's ``handle_now`` (registry.py)
            error: BaseException | None = None
            try:
                result = now(ctx, request)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # the handler's exception, as its task would keep it
                result, error = None, exc
            if type(result) is CoroutineType:  # its appends made: what they wait for
                self._begin(slot, request, ctx, result, timing)
                return
            if result is not NOT_NOW:
                self._now_ended(slot, request, ctx, timing, result, error)
                return
        self._start_handler(slot, request, ctx, handle, timing, last if later else None)

    def _begin(self, slot: Slot | None, request: Any, ctx: RequestContext,
               coro: Awaitable[Any], timing: RequestTiming | None) -> None:
        """The handler's coroutine run up to its first suspension now (eager.py)."""
        produce = ctx.header.api_key == 0
        if timing is None:
            task, result, error = eager.begin(coro, self._loop)
        else:  # the timing current in the handler's context only
            task, result, error = eager.begin(coro, self._loop,
                                              timing.completed, CURRENT_REQUEST, timing)
        if produce:
            self._last_produce = task  # None: it ended, nothing later waits for it
        if task is None:  # it never suspended
            if slot is None and timing is not None:  # acks=0
                self.request_metrics.record_no_response(timing)  # type: ignore[union-attr]
            self._finished(slot, ctx, request, result, error)
            return
        metrics = self.request_metrics

        def finished(t: asyncio.Future[Any]) -> None:
            if timing is not None and slot is None and metrics is not None:  # acks=0
                metrics.record_no_response(timing)
            self._done(t, slot, ctx, request)

        self._tasks.add(task)
        task.add_done_callback(finished)

    def _done(
        self, task: asyncio.Future[Any], slot: Slot | None, ctx: RequestContext, request: Any
    ) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        self._finished(slot, ctx, request, task.result() if error is None else None, error)

    def _finished(self, slot: Slot | None, ctx: RequestContext, request: Any, result: Any,
                  error: BaseException | None) -> None:
        """The handler of ``ctx``'s request ended with ``result`` or raised ``error``."""
        if self.closed:
            if error is None and isinstance(result, list):
                close_chunks(result)
            return
        if error is not None:
            self._handler_failed(error, slot, ctx.header, request)
            return
        if slot is None:
            if ctx.throttle_ms > 0:  # acks=0 over its quota: muting is the only throttle
                self._mute(ctx.throttle_ms)
            if ctx.close_reason:  # e.g. a failed acks=0 produce: the client only sees this
                self._close_after_earlier(ctx.close_reason)
            return
        self._complete(slot, ctx.header.correlation_id, result)
        if ctx.throttle_ms > 0:
            self._mute(ctx.throttle_ms)
        if ctx.close_reason:  # e.g. failed authentication: answer, then close
            self._close_after_answer(ctx.close_reason, ctx.close_delay_ms)

    def _complete(self, slot: Slot, correlation_id: int, result: Any) -> None:
        if result is None:
            slot.data = None
        elif type(result) is bytes or isinstance(result, bytearray | list):
            slot.data = result
        else:
            slot.data = encode_response(correlation_id, result)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    # -- output -------------------------------------------------------------------------------
    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.closed or self.writer is None:
            return
        slots = self.slots
        if len(slots) == 1 and type(slots[0].data) is bytes:  # one answer (a produce's):
            slot = slots.popleft()  # written to the transport itself when no file chunk waits
            dequeue_ns = time.perf_counter_ns()  # (``ResponseWriter.write``'s first case)
            clock = self._clock
            self.last_active = clock()
            writer = self.writer
            if writer.queue:
                writer.write([slot.data])
            else:
                try:
                    self.transport.write(slot.data)  # type: ignore[union-attr]
                except OSError as exc:
                    writer.abort()
                    self._send_failed(exc)
            if self.closed:
                return
            if slot.timing is not None and self.request_metrics is not None:
                self.request_metrics.record_sent_one(slot.timing, dequeue_ns)
            if not (self._reading_paused or self._writing_paused or self._muted_until or
                    writer.queue or len(slots) + len(self._tasks) >= self.max_queued):
                return  # (``_maybe_pause`` has nothing to change)
        elif slots and slots[0].data is not _PENDING:
            dequeue_ns = time.perf_counter_ns()
            out: list[Any] = []
            sent: list[RequestTiming] = []
            while slots and slots[0].data is not _PENDING:
                slot = slots.popleft()
                data = slot.data
                if slot.timing is not None:
                    sent.append(slot.timing)
                if data is None:
                    continue
                if isinstance(data, list):
                    out.extend(data)
                else:
                    out.append(data)
            if out:
                self.last_active = self._clock()
                self.writer.write(out)
                if self.closed:
                    return
            if sent and self.request_metrics is not None:
                self.request_metrics.record_sent(sent, dequeue_ns)
        self._maybe_pause()

    def _maybe_pause(self) -> None:
        if self.closed or self.transport is None:
            return
        busy = (self._writing_paused or bool(self._muted_until)
                or len(self.slots) + len(self._tasks) >= self.max_queued
                or (self.writer is not None and self.writer.waiting))  # a file chunk waits
        if busy and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not busy and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self, reason: str, *, graceful: bool = False) -> None:
        """Drop the connection; ``graceful`` sends what is buffered first."""
        if self.closed:
            return
        self.closed = True
        log.warning("closing connection from %s:%d: %s", *self.peer, reason)
        if self.transport is not None:
            if graceful and self.writer is not None:
                self.writer.when_drained(self.transport.close)
            elif graceful:
                self.transport.close()
            else:
                if self.writer is not None:
                    self.writer.abort()
                self.transport.abort()

    def _send_failed(self, exc: OSError) -> None:
        self.close(f"cannot send a fetch response: {exc}")

