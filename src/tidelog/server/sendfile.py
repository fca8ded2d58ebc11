"""Zero-copy Fetch: record data goes from the segment file to the socket with
``os.sendfile``. A response larger than the socket's send buffer (a consumer's 10 MB fetch
meets a loopback buffer of ~4 MB) is sent as Kafka's ``FileRecords.writeTo`` sends it: what
the kernel takes now, the rest once the socket is writable again, the file's bytes never
read into this process. While a file chunk waits, later responses wait behind it (strictly
in request order) and the connection reads no new request (``ResponseWriter.waiting``).
One ``pread`` still sends a chunk where sendfile cannot: over TLS (the transport encrypts
what it is given), when the transport holds unsent bytes of its own (they go first), or when
the kernel refuses sendfile for this pair of files.

A ``FileChunk`` holds a *duplicate* of the segment's fd, so retention closing or deleting
the segment between the read and the send can never make us send another file's bytes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)
SENDFILE_MIN_BYTES = 32 * 1024  # below this one pread + write is cheaper than the extra syscalls
_MAX_IOV = 512  # buffers in one sendmsg (Linux takes up to 1,024)
_MSG_MORE = int(socket.MSG_MORE)


class FileChunk:
    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise OSError(f"short read: {len(data)} of {self.size} bytes at {self.position}")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def slice_records(records: Any) -> Any:
    """A FileChunk for a large file slice, else its bytes."""
    size = getattr(records, "size", 0)
    if not size:
        return b""
    if size >= SENDFILE_MIN_BYTES and hasattr(records, "fileno"):
        try:
            return FileChunk(records.fileno(), records.position, size)
        except (OSError, ValueError, AttributeError):
            pass
    return records.read()


def close_chunks(chunks: Iterable[Any]) -> None:
    for c in chunks:
        if isinstance(c, FileChunk):
            c.close()


def _sendfile(sock_fd: int, chunk: FileChunk) -> bool | None:
    """Send what the kernel takes of ``chunk`` now (its position and size move on): True
    once all of it went, False when the socket is full, None when sendfile cannot send the
    rest (unsupported, or the file ended early: a pread tells which)."""
    while chunk.size:
        try:
            n = os.sendfile(sock_fd, chunk.fd, chunk.position, chunk.size)
        except BlockingIOError:
            return False
        except InterruptedError:
            continue
        except OSError:
            return None
        if n == 0:
            return None
        chunk.position += n
        chunk.size -= n
    return True


class ResponseWriter:
    """One connection's responses to its transport, in order (see the module docstring).
    ``write`` takes buffers and FileChunks; every FileChunk is closed once sent or dropped.
    ``on_drained`` is called when a wait for the socket ended (the connection reads again);
    ``on_error`` when a chunk could not be sent (the segment shrank under the fetch).
    ``zero_copy_bytes`` and ``copied_bytes`` count the file bytes sent each way.

    The bytes before a file chunk (a Fetch response's header, the partition's fields) go
    out with ``MSG_MORE`` on the socket itself, so that the kernel sends them in one
    segment with the chunk's first bytes: one packet (and one wake-up of the reader)
    per response instead of a small one ahead of the file's."""

    __slots__ = ("_after", "_on_drained", "_on_error", "_queue", "_sock", "_transport",
                 "_watching", "copied_bytes", "queue", "zero_copy_bytes")

    def __init__(self, transport: asyncio.Transport, on_drained: Callable[[], None],
                 on_error: Callable[[OSError], None]) -> None:
        self._transport = transport
        self._on_drained = on_drained
        self._on_error = on_error
        self._queue: deque[Any] = deque()
        self.queue = self._queue  # (to read only: what waits, ``waiting`` without a call)
        # a duplicate of the socket's fd, made at the first FileChunk (the transport owns
        # its own fd, and an event loop watches each fd once): sendfile, MSG_MORE sends and
        # the wait for the socket go through it; False when sendfile may not be used
        self._sock: socket.socket | bool | None = None
        self._watching = False
        self._after: Callable[[], None] | None = None  # run once drained (a graceful close)
        self.zero_copy_bytes = 0
        self.copied_bytes = 0

    @property
    def waiting(self) -> bool:
        """A file chunk waits for the socket to take more."""
        return bool(self._queue)

    def write(self, chunks: list[Any]) -> None:
        if self._queue:  # behind the chunk that waits
            self._queue.extend(chunks)
            return
        if len(chunks) == 1 and type(chunks[0]) is bytes:  # one small answer (a produce's)
            try:
                self._transport.write(chunks[0])
            except OSError as exc:
                self.abort()
                self._on_error(exc)
            return
        self._queue.extend(chunks)
        self._pump()

    def when_drained(self, action: Callable[[], None]) -> None:
        """``action`` (closing the transport) now, or once everything queued was sent;
        the writer's duplicate of the socket is closed first, so that the close ends the
        stream at once."""
        if self._queue:
            self._after = action
        else:
            self._release()
            action()

    def abort(self) -> None:
        """Drop what waits (the connection is gone)."""
        self._unwatch()
        close_chunks(self._queue)
        self._queue.clear()
        self._after = None
        self._release()

    def _release(self) -> None:
        """Close the duplicate of the socket (no file chunk is sent after this)."""
        self._unwatch()
        sock, self._sock = self._sock, False
        if isinstance(sock, socket.socket):
            sock.close()

    def _pump(self) -> None:
        queue = self._queue
        pending: list[Any] = []
        try:
            while queue:
                c = queue[0]
                if not isinstance(c, FileChunk):
                    pending.append(queue.popleft())
                    continue
                sock = self._sendfile_sock()
                if pending:
                    self._write_ahead(sock, pending)
                    pending = []
                if not self._send(sock, c):
                    self._watch()
                    return
                queue.popleft()
                c.close()
            if pending:
                self._transport.writelines(pending)
        except OSError as exc:
            self.abort()
            self._on_error(exc)
            return
        if self._watching:  # a wait ended
            self._unwatch()
            self._on_drained()
        after, self._after = self._after, None
        if after is not None:
            self._release()
            after()

    def _sendfile_sock(self) -> socket.socket | None:
        """The socket to sendfile to now, or None (TLS, no socket, or the transport still
        holds bytes of its own, which go first)."""
        sock = self._sock
        if sock is None:
            sock = self._sock = _sendfile_sock(self._transport)
        if sock is False or self._transport.get_write_buffer_size():
            return None
        return sock  # type: ignore[return-value]

    def _write_ahead(self, sock: socket.socket | None, pending: list[Any]) -> None:
        """The bytes before a file chunk: held back (``MSG_MORE``) to leave in one segment
        with the chunk's first bytes when sendfile follows; what the socket does not take
        now goes to the transport (the chunk is then copied behind it)."""
        if sock is None or len(pending) > _MAX_IOV:
            self._transport.writelines(pending)
            return
        try:
            n = sock.sendmsg(pending, (), _MSG_MORE)
        except OSError:  # full, interrupted, or broken (the transport finds out and closes)
            n = 0
        for b in pending:
            size = len(b) if not isinstance(b, memoryview) else b.nbytes
            if n >= size:
                n -= size
                continue
            self._transport.write(memoryview(b).cast("B")[n:] if n else b)
            n = 0

    def _send(self, sock: socket.socket | None, c: FileChunk) -> bool:
        """True once ``c`` was sent whole; False when the socket is full (the rest waits)."""
        if sock is not None and not self._transport.get_write_buffer_size():
            size = c.size
            done = _sendfile(sock.fileno(), c)
            self.zero_copy_bytes += size - c.size
            if done is not None:
                return done
        data = os.pread(c.fd, c.size, c.position)
        if len(data) != c.size:
            raise OSError(f"segment shrank under a fetch ({len(data)} of {c.size})")
        self._transport.write(data)
        self.copied_bytes += c.size
        return True

    def _watch(self) -> None:
        if not self._watching:
            sock = self._sock
            assert isinstance(sock, socket.socket)
            self._watching = True
            asyncio.get_running_loop().add_writer(sock.fileno(), self._pump)

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            sock = self._sock
            assert isinstance(sock, socket.socket)
            asyncio.get_running_loop().remove_writer(sock.fileno())


def _sendfile_sock(transport: asyncio.Transport) -> socket.socket | bool:
    """A socket on a duplicate of the transport's fd for sendfile, or False: never past
    TLS, where sendfile would put the file's plaintext on an encrypted stream."""
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("sslcontext") is not None:
        return False
    dup = socket.socket(fileno=os.dup(sock.fileno()))
    dup.setblocking(False)
    return dup
