"""The connection's ResponseWriter over a real loopback socket, on asyncio's loop and on
uvloop's (the broker's): a file chunk larger than the socket takes goes by sendfile in
pieces as the socket drains (never read into the process), later responses wait behind it
in order, a graceful close sends everything first, an abort lets the files go, and a
segment that shrank under the fetch closes the connection."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tidelog.server.sendfile import FileChunk, ResponseWriter

BIG = 12 << 20  # over the ~4 MB a loopback socket's send buffer grows to


def _loops() -> list[str]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return ["asyncio"]
    return ["asyncio", "uvloop"]


def _run(kind: str, main: Callable[[], Awaitable[None]]) -> None:
    if kind == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
            r.run(main())
    else:
        asyncio.run(main())


class _Pair:
    """A served transport and the client's non-blocking socket, on one loop."""

    def __init__(self, transport: asyncio.Transport, client: socket.socket,
                 server: asyncio.base_events.Server) -> None:
        self.transport, self.client, self.server = transport, client, server
        self.drained = 0
        self.errors: list[OSError] = []
        self.writer = ResponseWriter(transport, self._on_drained, self._on_error)

    def _on_drained(self) -> None:
        self.drained += 1

    def _on_error(self, exc: OSError) -> None:  # as the connection: it closes
        self.errors.append(exc)
        self.transport.abort()

    async def read(self, n: int) -> bytes:
        loop = asyncio.get_running_loop()
        got = bytearray()
        while len(got) < n:
            try:
                part = await asyncio.wait_for(loop.sock_recv(self.client, 1 << 20), 30)
            except ConnectionResetError:
                break
            if not part:
                break
            got += part
        return bytes(got)

    def close(self) -> None:
        self.writer.abort()
        self.transport.abort()
        self.client.close()
        self.server.close()


async def _pair() -> _Pair:
    loop = asyncio.get_running_loop()
    accepted: asyncio.Future[asyncio.Transport] = loop.create_future()

    class Served(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.set_result(transport)  # type: ignore[arg-type]

    server = await loop.create_server(Served, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setblocking(False)
    await loop.sock_connect(client, ("127.0.0.1", port))
    return _Pair(await accepted, client, server)


@pytest.fixture
def segment(tmp_path: Path) -> tuple[int, bytes]:
    data = os.urandom(BIG)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDWR)
    yield fd, data
    os.close(fd)


@pytest.mark.parametrize("loop", _loops())
def test_a_chunk_over_the_socket_buffer_goes_by_sendfile_in_order(
        loop: str, segment: tuple[int, bytes]) -> None:
    fd, data = segment

    async def main() -> None:
        p = await _pair()
        try:
            chunk = FileChunk(fd, 100, BIG - 200)
            p.writer.write([b"head", chunk, b"tail"])
            assert p.writer.waiting  # the client has read nothing yet
            p.writer.write([b"next response"])  # behind the waiting chunk
            expected = b"head" + data[100:BIG - 100] + b"tail" + b"next response"
            assert await p.read(len(expected)) == expected
            assert not p.writer.waiting
            assert p.writer.zero_copy_bytes == BIG - 200 and p.writer.copied_bytes == 0
            assert p.drained >= 1 and chunk.fd == -1 and not p.errors
            p.writer.write([b"after"])  # straight out again
            assert await p.read(5) == b"after"
        finally:
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_bytes_the_transport_still_holds_go_first_and_the_chunk_is_copied(
        loop: str, segment: tuple[int, bytes]) -> None:
    fd, data = segment

    async def main() -> None:
        p = await _pair()
        try:
            blob = os.urandom(BIG)  # more than the socket takes: the transport keeps the rest
            p.writer.write([blob, FileChunk(fd, 0, 1 << 20)])
            assert p.transport.get_write_buffer_size() > 0
            assert await p.read(BIG + (1 << 20)) == blob + data[: 1 << 20]
            assert p.writer.copied_bytes == 1 << 20 and p.writer.zero_copy_bytes == 0
        finally:
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_a_graceful_close_sends_what_waits_first(loop: str, segment: tuple[int, bytes]) -> None:
    fd, data = segment

    async def main() -> None:
        p = await _pair()
        try:
            p.writer.write([FileChunk(fd, 0, BIG)])
            assert p.writer.waiting
            p.writer.when_drained(p.transport.close)
            assert not p.transport.is_closing()  # not before the chunk went
            assert await p.read(BIG + 1) == data  # everything, then the end of the stream
        finally:
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_an_abort_lets_the_waiting_chunks_go(loop: str, segment: tuple[int, bytes]) -> None:
    fd, _ = segment

    async def main() -> None:
        p = await _pair()
        try:
            first, second = FileChunk(fd, 0, BIG), FileChunk(fd, 0, BIG)
            p.writer.write([first, b"x", second])
            assert p.writer.waiting
            p.writer.abort()
            assert not p.writer.waiting and first.fd == -1 and second.fd == -1
        finally:
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_a_segment_that_shrank_under_the_fetch_is_an_error(
        loop: str, segment: tuple[int, bytes]) -> None:
    fd, _ = segment

    async def main() -> None:
        p = await _pair()
        try:
            chunk = FileChunk(fd, 0, BIG)
            p.writer.write([chunk])
            assert p.writer.waiting
            os.ftruncate(fd, 1 << 20)  # below what was sent already
            got = await p.read(BIG)  # what went, then the end: the writer met the file's end
            assert len(got) < BIG
            assert len(p.errors) == 1 and "shrank" in str(p.errors[0])
            assert not p.writer.waiting and chunk.fd == -1
        finally:
            p.close()

    _run(loop, main)


def _data_segs_out(sock: socket.socket) -> int:
    """Linux's tcp_info.tcpi_data_segs_out: the segments with data this socket sent."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return int.from_bytes(info[156:160], "little")


@pytest.mark.parametrize("loop", _loops())
def test_a_response_header_leaves_in_one_segment_with_the_file_bytes(
        loop: str, segment: tuple[int, bytes]) -> None:
    """The bytes ahead of a file chunk are held back (MSG_MORE) and go out with the
    chunk's first bytes: the header costs no segment of its own, the same count as one
    send of header and file bytes together, and the stream is byte for byte the same."""
    fd, data = segment
    size = 32 * 1024  # a Fetch's smallest file chunk (SENDFILE_MIN_BYTES)

    async def main() -> None:
        p = await _pair()
        sock = socket.socket(fileno=os.dup(p.transport.get_extra_info("socket").fileno()))
        try:
            head = os.urandom(75)
            p.writer.write([b"warm", FileChunk(fd, 0, size)])  # the writer's socket is made
            assert await p.read(4 + size) == b"warm" + data[:size]
            for _ in range(5):  # a retransmit may add a segment: try again
                before = _data_segs_out(sock)
                sock.send(head + data[:size])
                assert await p.read(75 + size) == head + data[:size]
                one_send = _data_segs_out(sock) - before
                before = _data_segs_out(sock)
                p.writer.write([head, FileChunk(fd, 4096, size), b"tail"])
                assert await p.read(75 + size + 4) == head + data[4096:4096 + size] + b"tail"
                by_writer = _data_segs_out(sock) - before
                if by_writer == one_send + 1:  # the tail's own segment, nothing more
                    break
            assert by_writer == one_send + 1, (by_writer, one_send)
            assert p.writer.zero_copy_bytes == 2 * size and p.writer.copied_bytes == 0
        finally:
            sock.close()
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_bytes_ahead_of_a_chunk_the_socket_cannot_take_go_through_the_transport(
        loop: str, segment: tuple[int, bytes]) -> None:
    """A header larger than the socket takes: the socket takes what it can, the transport
    the rest, and the chunk behind them is copied after it, in order."""
    fd, data = segment

    async def main() -> None:
        p = await _pair()
        try:
            head = os.urandom(BIG)
            p.writer.write([b"first", FileChunk(fd, 0, 1 << 15)])  # the writer's socket is made
            assert await p.read(5 + (1 << 15)) == b"first" + data[: 1 << 15]
            p.writer.write([b"x", memoryview(head), FileChunk(fd, 7, 1 << 20), b"end"])
            assert p.transport.get_write_buffer_size() > 0  # the rest of the header
            expected = b"x" + head + data[7:7 + (1 << 20)] + b"end"
            assert await p.read(len(expected)) == expected
            assert p.writer.copied_bytes == 1 << 20 and p.writer.zero_copy_bytes == 1 << 15
        finally:
            p.close()

    _run(loop, main)


@pytest.mark.parametrize("loop", _loops())
def test_a_graceful_close_after_a_sendfile_ends_the_stream(
        loop: str, segment: tuple[int, bytes]) -> None:
    """The writer's duplicate of the socket does not keep the connection open once the
    transport closes."""
    fd, data = segment

    async def main() -> None:
        p = await _pair()
        try:
            p.writer.write([b"h", FileChunk(fd, 0, 1 << 16)])
            assert not p.writer.waiting
            p.writer.when_drained(p.transport.close)
            assert await p.read(1 + (1 << 16) + 1) == b"h" + data[: 1 << 16]  # then EOF
        finally:
            p.close()

    _run(loop, main)
