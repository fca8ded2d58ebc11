"""Connection level of the client: API version ranges, errors, one broker socket.

Split from client.py (which re-exports every name here)."""

from __future__ import annotations

import socket
import struct
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from .bootstrap import parse_bootstrap as parse_bootstrap  # re-exported
from .security import ClientSecurity, SaslError
from .wire import decode_response, encode_request

# (our min, our max) per API key; capped where a newer version changes the layout (Fetch 13
# names topics by id, FindCoordinator 4 batches keys, DeleteTopics 6 uses topic ids).
API_RANGES: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce (zstd needs >= 7)
    1: (4, 12),  # Fetch
    2: (1, 9),  # ListOffsets (8: EARLIEST_LOCAL -4, 9: LATEST_TIERED -5; layout of 6)
    3: (1, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch
    10: (1, 3),  # FindCoordinator
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics
    22: (0, 4),  # InitProducerId
}
API_VERSIONS = 18
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
RETRIABLE = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower,
    ErrorCode.request_timed_out,
    ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.not_enough_replicas,
}
_SIZE = struct.Struct(">i")


class KafkaClientError(Exception):
    """A broker answered with an error code (``error`` is kio's ErrorCode)."""

    def __init__(self, error: ErrorCode | int, context: str, message: str | None = None) -> None:
        self.error = ErrorCode(int(error))
        self.context, self.message = context, message
        self.retriable = self.error in RETRIABLE
        text = f"{context}: {self.error.name.upper()} ({int(self.error)})"
        super().__init__(f"{text}: {message}" if message else text)


class KafkaConnectionError(KafkaClientError):
    def __init__(self, context: str) -> None:
        super().__init__(ErrorCode.network_exception, context)


def check(error: Any, context: str, message: str | None = None) -> None:
    if int(error) != 0:
        raise KafkaClientError(int(error), context, message)


class TopicPartition(NamedTuple):
    """Same shape as tidelog.util.topic_partition.TopicPartition (protocol may not import util)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class BrokerConnection:
    """One socket to one broker; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int, *, client_id: str, timeout_s: float,
                 security: ClientSecurity | None = None) -> None:
        self.address = (host, port)
        self.client_id = client_id
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None:
                self.sock = security.wrap(self.sock, host)
        except OSError as e:
            raise KafkaConnectionError(f"connect to {host}:{port}: {e}") from e
        self._correlation = 0
        self.versions: dict[int, int] = {}
        self._negotiate()
        if security is not None:
            try:
                security.authenticate(self.call)
            except SaslError as e:
                self.close()
                raise KafkaClientError(
                    ErrorCode.sasl_authentication_failed, f"SASL to {host}:{port}", str(e)
                ) from e

    def _negotiate(self) -> None:
        """ApiVersions v3, or v0 when the broker answers UNSUPPORTED_VERSION (KIP-511)."""
        try:
            resp = self.call(
                API_VERSIONS,
                3,
                {"client_software_name": "tidelog", "client_software_version": "0.1"},
            )
        except KafkaConnectionError:
            raise  # no answer (the socket is closed): not a broker refusing v3
        except KafkaClientError:
            resp = self.call(API_VERSIONS, 0, {})
        if int(resp.error_code) == int(ErrorCode.unsupported_version):
            resp = self.call(API_VERSIONS, 0, {})
        check(resp.error_code, "ApiVersions")
        for k in resp.api_keys:
            ours = API_RANGES.get(int(k.api_key))
            if ours is None:
                continue
            hi = min(ours[1], int(k.max_version))
            if hi >= max(ours[0], int(k.min_version)):
                self.versions[int(k.api_key)] = hi

    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            raise KafkaClientError(
                ErrorCode.unsupported_version,
                f"broker {self.address[0]}:{self.address[1]} supports no version of API {api_key} in {API_RANGES[api_key]}",
            ) from None

    def call(
        self, api_key: int, version: int, body: dict[str, Any], *, expect_response: bool = True
    ) -> Any:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        frame = encode_request(api_key, version, self._correlation, self.client_id, body)
        try:
            self.sock.sendall(frame)
            if not expect_response:
                return None
            (size,) = _SIZE.unpack(self._recv(4))
            payload = self._recv(size)
        except OSError as e:
            self.close()
            raise KafkaConnectionError(f"API {api_key} v{version} to {self.address}: {e}") from e
        correlation, resp = decode_response(api_key, version, payload)
        if correlation != self._correlation:
            self.close()
            raise KafkaConnectionError(f"correlation id {correlation} != {self._correlation}")
        return resp

    def request(self, api_key: int, body: dict[str, Any]) -> Any:
        return self.call(api_key, self.version(api_key), body)

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise OSError("connection closed by the broker")
            got += k
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
