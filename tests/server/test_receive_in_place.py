"""The connection as a BufferedProtocol (server/connection.py): a large Produce frame's rest
is received straight into the frame's own buffer (its records are views of the very memory
the transport wrote), never past the frame's end; everything else is read into the thread's
shared read buffer, of which a connection keeps only what it copied out. In-process with a
fake transport, then over real sockets, plain and TLS, on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from broker_wire import decode_response, fetch_body, produce_body, recv_frame, request_frame
from recording_transport import RecordingTransport

from tidelog.records import build_batch
from tidelog.server.connection import KafkaConnection
from tidelog.server.receive import HEAD_READ, PRODUCE_IN_PLACE, READ_BUFFER
from tidelog.server.registry import HandlerSpec, Registry
from tidelog.testing import EmbeddedBroker

API_VERSIONS = 18


class _Config:
    values = {"socket.request.max.bytes": "104857600", "queued.max.requests": "500"}


class _Broker:
    def __init__(self) -> None:
        self.config = _Config()
        self.connections: set[KafkaConnection] = set()
        self.registry = Registry()
        self.produced: list[Any] = []  # the records of each Produce, as the handler got them
        self.registry.register(HandlerSpec(API_VERSIONS, 0, 3, self._versions, "versions"))
        self.registry.register(HandlerSpec(0, 0, 11, self._produce, "produce"))

    async def _versions(self, ctx: Any, request: Any) -> bytes:
        return ctx.header.correlation_id.to_bytes(4, "big")

    async def _produce(self, ctx: Any, request: Any) -> bytes:
        self.produced.append(request.topic_data[0].partition_data[0].records)
        return ctx.header.correlation_id.to_bytes(4, "big")


def _connection(broker: _Broker) -> tuple[KafkaConnection, RecordingTransport]:
    transport = RecordingTransport()
    conn = KafkaConnection(broker)  # type: ignore[arg-type]
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def _read(conn: KafkaConnection, data: bytes, most: int) -> list[tuple[object, int]]:
    """``data`` received as a transport receives it, at most ``most`` bytes a read: the
    buffer each read went into and its length."""
    reads = []
    pos = 0
    while pos < len(data):
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), most, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        reads.append((buf.obj, len(buf)))
        del buf
        conn.buffer_updated(n)
        pos += n
    return reads


def _batch(n: int, size: int = 250) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(now, None, os.urandom(size)) for _ in range(n)])


def _produce(corr: int, batch: bytes) -> bytes:
    return request_frame(0, 9, corr, body=produce_body(9, "t", {0: batch}))


def _versions(corr: int) -> bytes:
    return request_frame(API_VERSIONS, 3, corr, client_software_name="t",
                         client_software_version="1")


def test_a_large_frame_is_received_into_its_own_buffer_and_not_past_its_end() -> None:
    """Two large produces and a small request in one stream, read 64 KiB at a time: the
    first read goes to the shared buffer, the rest of each large frame into that frame's
    own buffer (offered up to its end only), and after a large frame only the shared
    buffer's head is offered, so the next large frame is received into place from there."""
    async def main() -> None:
        broker = _Broker()
        conn, transport = _connection(broker)
        batches = [_batch(1200), _batch(600)]  # about 300 and 150 KiB
        frames = [_produce(i + 1, b) for i, b in enumerate(batches)]
        assert len(frames[0]) > READ_BUFFER and len(batches[1]) >= PRODUCE_IN_PLACE
        most = 64 << 10
        reads = _read(conn, b"".join(frames) + _versions(3), most)
        assert transport.written == [b"\0\0\0\1", b"\0\0\0\2", b"\0\0\0\3"]  # in order
        assert [bytes(r) for r in broker.produced] == batches
        owns = [r.obj for r in broker.produced]  # each produce's records: a view of...
        shared = reads[0][0]
        assert all(own is not shared for own in owns)
        into = [(next(i for i, own in enumerate(owns) if own is obj) if obj is not shared
                 else "shared", offered) for obj, offered in reads]
        # ...the buffer the rest of its frame was received into, offered to its end
        first = [READ_BUFFER] + [len(frames[0]) - most - i * most for i in range(8)]
        second = [HEAD_READ] + [len(frames[1]) - HEAD_READ - i * most for i in range(8)]
        assert into == [("shared", first[0])] + [(0, n) for n in first[1:] if n > 0] + [
            ("shared", second[0])] + [(1, n) for n in second[1:] if n > 0] + [
            ("shared", HEAD_READ)]
        assert not conn.buf and conn.get_buffer(-1).obj is shared
        assert len(conn.get_buffer(-1)) == READ_BUFFER  # after a small frame: all of it

    asyncio.run(main())


@pytest.mark.parametrize("most", [1, 3, 7, 1000, 65536, 1 << 20])
def test_frames_cut_anywhere_are_answered_once_each_in_order(most: int) -> None:
    """Small and in-place frames in one stream, read in pieces of every size: each request
    is answered once, in order, each produce's records byte for byte."""
    async def main() -> None:
        broker = _Broker()
        conn, transport = _connection(broker)
        batches = {2: _batch(3), 4: _batch(400), 6: _batch(5), 7: _batch(300)}
        stream = b"".join(_produce(c, batches[c]) if c in batches else _versions(c)
                          for c in range(1, 9))
        _read(conn, stream, most)
        assert transport.written == [c.to_bytes(4, "big") for c in range(1, 9)]
        assert [bytes(r) for r in broker.produced] == [batches[c] for c in sorted(batches)]
        assert not conn.buf and conn._large is None

    asyncio.run(main())


def test_what_a_connection_keeps_survives_the_next_read_of_another() -> None:
    """Two connections on one thread read into the same shared buffer: the half frame one
    holds over is its own copy, not a view the other's read overwrites."""
    async def main() -> None:
        broker = _Broker()
        a, a_out = _connection(broker)
        b, b_out = _connection(broker)
        batch = _batch(2)
        first, second = _versions(1), _produce(2, batch)
        _read(a, first[:9], 1 << 20)  # the size, the API key and part of the header
        _read(b, b"\xff" * 9 + b"\0" * 100, 1 << 20)  # a negative size: b closes
        assert b.closed
        _read(a, first[9:] + second, 1 << 20)
        assert a_out.written == [b"\0\0\0\1", b"\0\0\0\2"] and not b_out.written
        assert [bytes(r) for r in broker.produced] == [batch]

    asyncio.run(main())


# -- over real sockets -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(d / "broker.pem"))
    yield d / "ca.pem", d / "broker.pem"


@pytest.fixture(scope="module", params=["uvloop", "asyncio"])
def broker(request: pytest.FixtureRequest, pki: tuple[Path, Path]) -> Iterator[EmbeddedBroker]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki[1]),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki[0]),
        "auto.create.topics.enable": "true", "message.max.bytes": str(4 << 20),
    }
    saved = sys.modules.get("uvloop")
    if request.param == "asyncio":
        sys.modules["uvloop"] = None  # type: ignore[assignment]  # (its import then fails)
    else:
        pytest.importorskip("uvloop")
    try:
        b = EmbeddedBroker(props).start()
    finally:
        if request.param == "asyncio":
            if saved is None:
                del sys.modules["uvloop"]
            else:
                sys.modules["uvloop"] = saved
    loop_name = type(b._loop).__module__  # (which loop it runs on)
    assert loop_name.startswith(request.param), loop_name
    try:
        yield b
    finally:
        b.stop()


def _connect(b: EmbeddedBroker, listener: str, ca: Path) -> socket.socket:
    port = b.broker.bound_ports[listener]  # type: ignore[union-attr]
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    if listener == "SSL":
        return ssl.create_default_context(cafile=str(ca)).wrap_socket(
            s, server_hostname="127.0.0.1")
    return s


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_large_produces_land_byte_for_byte(broker: EmbeddedBroker, pki: tuple[Path, Path],
                                           listener: str) -> None:
    """A produce larger than the shared read buffer, one of LARGE_FRAME and more, and a
    pipelined request after them in the same writes, dribbled: answered in order, and the
    records come back as sent (but the base offset the broker set)."""
    topic = f"receive-{listener}-{type(broker._loop).__module__}"
    batches = [_batch(1200), _batch(4500)]  # ~300 KiB, ~1.1 MiB
    frames = [request_frame(0, 9, i + 1, body=produce_body(9, topic, {0: batch}))
              for i, batch in enumerate(batches)]
    stream = b"".join(frames) + _versions(3)
    with _connect(broker, listener, pki[0]) as s:
        for i in range(0, len(stream), 100_000):
            s.sendall(stream[i : i + 100_000])
        answers: list[Any] = [decode_response(0, 9, recv_frame(s)) for _ in batches]
        assert [a.responses[0].partition_responses[0].error_code for a in answers] == [0, 0]
        assert [a.responses[0].partition_responses[0].base_offset for a in answers] == [
            0, 1200]
        assert recv_frame(s)[:4] == (3).to_bytes(4, "big")
        s.sendall(request_frame(1, 12, 4, body=fetch_body(12, topic, {0: 0},
                                                           max_bytes=8 << 20,
                                                           partition_max_bytes=8 << 20)))
        fetched: Any = decode_response(1, 12, recv_frame(s))
    records = bytes(fetched.responses[0].partitions[0].records)
    assert len(records) == sum(map(len, batches))
    pos = 0
    for batch in batches:  # the broker set the base offset and the leader epoch only
        got = records[pos : pos + len(batch)]
        assert got[8:12] == batch[8:12] and got[16:] == batch[16:]
        pos += len(batch)
