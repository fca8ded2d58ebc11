"""What a connection does with a request's outcome besides queueing its answer: a failed
handler answered UNKNOWN_SERVER_ERROR (Kafka's handleError), a close after the answer or
after the requests still running, a quota's mute (KIP-219). ``ConnectionOutcomes`` is a
mixin of ``KafkaConnection`` (connection.py), kept apart so that each stays small; ``Slot``
is a response's place in the connection's order."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from tidelog.metrics.requests import RequestTiming
from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.errors import ErrorCode

from .error_response import error_response

log = logging.getLogger("tidelog.server.connection")
PENDING = object()  # a slot's data until its handler ended


@dataclass(slots=True, eq=False)
class Slot:
    """A request's place in the connection's answer order: its timing, and its answer once
    its handler ended (PENDING until then)."""

    timing: RequestTiming | None = None
    data: Any = PENDING



class ConnectionOutcomes:
    peer: tuple[str, int]
    closed: bool
    closed_for_auth: bool
    buf: bytearray
    slots: deque[Slot]
    _tasks: set[asyncio.Future[Any]]
    _closing: asyncio.Future[None] | None
    _muted_until: float

    def close(self, reason: str, *, graceful: bool = False) -> None:
        raise NotImplementedError  # the connection's

    def data_received(self, data: bytes) -> None:
        raise NotImplementedError  # the connection's

    def _flush(self) -> None:
        raise NotImplementedError  # the connection's

    def _complete(self, slot: Slot, correlation_id: int, result: Any) -> None:
        raise NotImplementedError  # the connection's

    def _maybe_pause(self) -> None:
        raise NotImplementedError  # the connection's

    def _handler_failed(
        self, exc: BaseException, slot: Slot | None, header: RequestHeader, request: Any
    ) -> None:
        """A handler raised: log it and answer UNKNOWN_SERVER_ERROR (Kafka's handleError),
        or close when there is no slot to answer in or no error response to build."""
        log.error(
            "handler for API %d v%d failed (client %s %s:%d)",
            header.api_key,
            header.api_version,
            header.client_id,
            *self.peer,
            exc_info=exc,
        )
        try:
            fallback = error_response(
                header.api_key, header.api_version, request, ErrorCode.UNKNOWN_SERVER_ERROR
            )
        except Exception:  # never let the error path take the loop down
            log.exception("no error response for API %d v%d", header.api_key, header.api_version)
            fallback = None
        if slot is None or fallback is None:
            self._refuse("handler error")
        else:
            self._complete(slot, header.correlation_id, fallback)

    def _refuse(self, reason: str) -> None:
        """A request that closes the connection: the answers of the requests before it that
        are ready written first (Kafka, reading a connection's requests one at a time, has
        sent those), then the close."""
        if self.slots:
            self._flush()
        self.close(reason)

    def _close_after_answer(self, reason: str, delay_ms: int) -> None:
        """Flush the answer just completed, then close (at once, or after ``delay_ms``)."""
        self._flush()
        if delay_ms > 0:
            # Kafka's delayed close: the answer goes out now, the connection stays
            # unread until connection.failed.authentication.delay.ms has passed
            self.closed_for_auth = True
            asyncio.get_running_loop().call_later(
                delay_ms / 1000, lambda: self.close(reason, graceful=True)
            )
        else:
            self.close(reason, graceful=True)

    def _close_after_earlier(self, reason: str) -> None:
        """Close once the requests still running end (an earlier produce may still be
        writing): Kafka reads nothing after the failed request, having run the ones before."""
        pending = [t for t in self._tasks if not t.done()]
        if not pending:
            self._flush()
            self.close(reason)
            return

        async def later() -> None:
            await asyncio.wait(pending)
            self._flush()
            self.close(reason)

        self._closing = asyncio.ensure_future(later())

    def _mute(self, ms: int) -> None:
        """Read nothing from this client for ``ms`` (Kafka mutes a throttled channel after
        sending the response that carries throttle_time_ms, KIP-219)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._maybe_pause()
        loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if self._muted_until != until or self.closed:
            return  # a later throttle extended the mute
        self._muted_until = 0.0
        self._maybe_pause()
        if self.buf:
            self.data_received(b"")  # the requests that arrived while muted
