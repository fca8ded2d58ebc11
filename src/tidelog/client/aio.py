"""An asyncio connection to one broker, for the broker's own use (follower fetches,
AlterPartition, the controller's requests): Kafka's NetworkClient for one node.

* ApiVersions first (v3, or v0 when the broker answers UNSUPPORTED_VERSION, as conn.py
  does), then the highest version both sides speak of each API in ``api_ranges``;
* TLS and SASL through the client's ``ClientSecurity`` (its sans-I/O SASL exchange);
* requests are pipelined: each is written at once and its response matched by correlation
  id by one reader task, so a long-polling Fetch does not hold up an OffsetForLeaderEpoch;
* a request that gets no answer within its timeout closes the connection, as Kafka's
  NetworkClient does (``replica.socket.timeout.ms`` / ``request.timeout.ms``): a response
  that may still arrive is not worth a connection whose state is unknown; every request
  still waiting fails with ``KafkaConnectionError`` and the caller reconnects;
* ``close()`` ends the reader, closes the socket and fails what is still pending.

Response objects are kio's (records stay ``bytes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from .conn import API_VERSIONS, KafkaClientError, KafkaConnectionError, check
from .security import ClientSecurity, SaslError
from .wire import decode_response, encode_request

log = logging.getLogger(__name__)

# the versions a broker speaks to another broker: (lowest, highest) per API key
INTER_BROKER_API_RANGES: dict[int, tuple[int, int]] = {
    1: (12, 15),  # Fetch: diverging epochs (v12), topic ids (v13), ReplicaState (v15)
    2: (1, 7),  # ListOffsets
    3: (1, 12),  # Metadata
    4: (5, 7),  # LeaderAndIsr
    5: (3, 4),  # StopReplica
    6: (7, 8),  # UpdateMetadata
    7: (3, 3),  # ControlledShutdown
    18: (0, 3),  # ApiVersions
    23: (3, 4),  # OffsetForLeaderEpoch (replica_id from v3)
    56: (2, 3),  # AlterPartition (topic ids from v2)
}
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


@dataclass(slots=True)
class _Pending:
    api_key: int
    version: int
    future: asyncio.Future[Any]


class AsyncBrokerConnection:
    """One pipelined connection; build with :meth:`connect`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        address: tuple[str, int],
        client_id: str,
        timeout_s: float,
        api_ranges: Mapping[int, tuple[int, int]],
    ) -> None:
        self.address = address
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.api_ranges = dict(api_ranges)
        self.versions: dict[int, int] = {}
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, _Pending] = {}
        # requests whose caller stopped waiting (cancelled) before the response came: the
        # response still arrives, in order, and is dropped without closing the connection
        self._abandoned: set[int] = set()
        self._correlation = 0
        self._closed = False
        self._close_reason = "closed"
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"aio-read-{address[0]}:{address[1]}"
        )

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str,
        timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
        api_ranges: Mapping[int, tuple[int, int]] = INTER_BROKER_API_RANGES,
    ) -> AsyncBrokerConnection:
        """Connect, negotiate API versions and authenticate; KafkaConnectionError when the
        broker cannot be reached in ``timeout_s``, KafkaClientError when it refuses us."""
        ssl_ctx = security.ssl_context() if security is not None else None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ssl_ctx, server_hostname=host if ssl_ctx else None
                )
        except (OSError, TimeoutError) as e:
            raise KafkaConnectionError(f"connect to {host}:{port}: {e!r}") from e
        conn = cls(
            reader,
            writer,
            address=(host, port),
            client_id=client_id,
            timeout_s=timeout_s,
            api_ranges=api_ranges,
        )
        try:
            await conn._negotiate()
            if security is not None:
                await conn._authenticate(security)
        except BaseException:
            await conn.close()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def version(self, api_key: int) -> int:
        """The negotiated version of an API; KafkaClientError(UNSUPPORTED_VERSION) if none."""
        try:
            return self.versions[api_key]
        except KeyError:
            raise KafkaClientError(
                ErrorCode.unsupported_version,
                f"broker {self.address[0]}:{self.address[1]} speaks no version of API "
                f"{api_key} in {self.api_ranges.get(api_key)}",
            ) from None

    async def request(self, api_key: int, body: Any, *, timeout_s: float | None = None) -> Any:
        """``call`` at the negotiated version."""
        return await self.call(api_key, self.version(api_key), body, timeout_s=timeout_s)

    async def call(
        self, api_key: int, version: int, body: Any, *, timeout_s: float | None = None
    ) -> Any:
        """Send one request (a dict of field values, or a kio request object) and await its
        response. On timeout the connection is closed and ``KafkaClientError
        (REQUEST_TIMED_OUT)`` raised; on a lost connection ``KafkaConnectionError``."""
        if self._closed:
            raise KafkaConnectionError(f"{self._describe()}: {self._close_reason}")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        frame = encode_request(api_key, version, correlation, self.client_id, body)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = _Pending(api_key, version, future)
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._pending.pop(correlation, None)
            self._fail(f"write failed: {e!r}")
            raise KafkaConnectionError(
                f"API {api_key} v{version} to {self._describe()}: {e!r}"
            ) from e
        wait = self.timeout_s if timeout_s is None else timeout_s
        try:
            # asyncio.timeout, not wait_for: wait_for can swallow a cancellation that comes
            # with the response (Python 3.11), and a sender that cannot be cancelled hangs
            # whoever stops it
            async with asyncio.timeout(wait):
                return await asyncio.shield(future)
        except TimeoutError:
            self._fail(f"API {api_key} v{version} got no response in {wait:.3f} s")
            raise KafkaClientError(
                ErrorCode.request_timed_out, f"API {api_key} v{version} to {self._describe()}"
            ) from None
        finally:
            if self._pending.pop(correlation, None) is not None and not future.done():
                self._abandoned.add(correlation)

    async def close(self) -> None:
        """Close the socket; requests still waiting fail with KafkaConnectionError."""
        self._fail("closed")
        if self._read_task is not asyncio.current_task():
            self._read_task.cancel()
            # asyncio.wait, not await: a cancellation of close() itself must propagate
            await asyncio.wait({self._read_task})
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)

    # -- internals ------------------------------------------------------------------------

    def _describe(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _fail(self, reason: str) -> None:
        """Mark closed, close the transport and fail every pending request (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        self._writer.close()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(KafkaConnectionError(f"{self._describe()}: {reason}"))
                p.future.exception()  # retrieved: a caller that timed out never awaits it

    async def _read_loop(self) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise ValueError(f"response frame of {size} bytes")
                payload = await self._reader.readexactly(size)
                self._deliver(payload)
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.IncompleteReadError) as e:
            self._fail(f"connection lost: {e!r}")
        except Exception as e:  # an undecodable or unexpected response: the stream is lost
            log.warning("closing the connection to %s: %s", self._describe(), e)
            self._fail(f"protocol error: {e!r}")

    def _deliver(self, payload: bytes) -> None:
        (correlation,) = _CORRELATION.unpack_from(payload, 0)
        pending = self._pending.get(correlation)
        if pending is None:
            if correlation in self._abandoned or self._closed:
                self._abandoned.discard(correlation)
                log.debug("%s: dropped the response to request %d: it arrived after its "
                          "caller stopped waiting (cancelled, timed out or closed)",
                          self._describe(), correlation)
                return
            raise ValueError(f"a response with correlation id {correlation}, which matches no "
                             "request sent on this connection")
        _, response = decode_response(pending.api_key, pending.version, payload)
        if not pending.future.done():
            pending.future.set_result(response)

    async def _negotiate(self) -> None:
        resp = await self.call(
            API_VERSIONS, 3, {"client_software_name": "tidelog", "client_software_version": "0.1"}
        )
        if int(resp.error_code) == int(ErrorCode.unsupported_version):
            resp = await self.call(API_VERSIONS, 0, {})
        check(resp.error_code, "ApiVersions")
        for k in resp.api_keys:
            ours = self.api_ranges.get(int(k.api_key))
            if ours is None:
                continue
            high = min(ours[1], int(k.max_version))
            if high >= max(ours[0], int(k.min_version)):
                self.versions[int(k.api_key)] = high

    async def _authenticate(self, security: ClientSecurity) -> None:
        exchange = security.sasl_exchange()
        try:
            request = next(exchange)
            while True:
                request = exchange.send(await self.call(*request))
        except StopIteration:
            return
        except SaslError as e:
            raise KafkaClientError(
                ErrorCode.sasl_authentication_failed, f"SASL to {self._describe()}", str(e)
            ) from e
