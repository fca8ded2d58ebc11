"""Raw Kafka frames for the SASL wire tests (kio-encoded requests, decoded responses)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.protocol.codec import request_class, response_class
from tidelog.protocol.kio_util import make


def frame(api_key: int, version: int, corr: int, **kw: Any) -> bytes:
    cls = request_class(api_key, version)
    hdr = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr)(buf, hdr(request_api_key=api_key, request_api_version=version,
                                 correlation_id=corr, client_id="sasl-test"))
    entity_writer(cls)(buf, make(cls, **kw))
    return struct.pack(">i", buf.tell()) + buf.getvalue()


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def call(sock: socket.socket, api_key: int, version: int, corr: int = 1, **kw: Any) -> Any:
    sock.sendall(frame(api_key, version, corr, **kw))
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    data = recv_exact(sock, n)
    cls = response_class(api_key, version)
    offset = 5 if cls.__header_schema__.__version__ >= 1 else 4
    obj, _ = entity_reader(cls)(data, offset)
    return obj


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the broker closed the connection (EOF or reset) within the socket timeout."""
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
