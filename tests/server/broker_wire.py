"""Raw-socket helpers for broker tests."""

from __future__ import annotations

import socket
import struct

from tidelog.protocol.codec import request_class
from tidelog.protocol.kio_util import make
from tidelog.testing import EmbeddedBroker


def request_frame(
    api_key: int, version: int, corr: int, body: object = None, **kw: object
) -> bytes:
    """A framed request built with kio (the request body encodes like a response body)."""
    import io

    from kio.serial import entity_writer

    cls = request_class(api_key, version)
    obj = body if body is not None else make(cls, **kw)
    hdr_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr_cls)(
        buf,
        hdr_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=corr,
            client_id="test",
        ),
    )
    entity_writer(cls)(buf, obj)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, n)


def connect(b: EmbeddedBroker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    return s
