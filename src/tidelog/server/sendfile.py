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
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)
SENDFILE_MIN_BYTES = 32 * 1024  # below this one pread + write is cheaper than the extra syscalls


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
    ``zero_copy_bytes`` and ``copied_bytes`` count the file bytes sent each way."""

    __slots__ = ("_after", "_on_drained", "_on_error", "_queue", "_sock_fd", "_transport",
                 "_watch_fd", "copied_bytes", "zero_copy_bytes")

    def __init__(self, transport: asyncio.Transport, on_drained: Callable[[], None],
                 on_error: Callable[[OSError], None]) -> None:
        self._transport = transport
        self._on_drained = on_drained
        self._on_error = on_error
        self._queue: deque[Any] = deque()
        self._sock_fd: int | None = None  # looked up at the first FileChunk
        self._watch_fd = -1  # a duplicate of the socket's fd, watched while waiting
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
        """``action`` now, or once everything queued was sent."""
        if self._queue:
            self._after = action
        else:
            action()

    def abort(self) -> None:
        """Drop what waits (the connection is gone)."""
        self._unwatch()
        close_chunks(self._queue)
        self._queue.clear()
        self._after = None

    def _pump(self) -> None:
        queue = self._queue
        transport = self._transport
        pending: list[Any] = []
        try:
            while queue:
                c = queue[0]
                if not isinstance(c, FileChunk):
                    pending.append(queue.popleft())
                    continue
                if pending:
                    transport.writelines(pending)
                    pending = []
                if not self._send(c):
                    self._watch()
                    return
                queue.popleft()
                c.close()
            if pending:
                transport.writelines(pending)
        except OSError as exc:
            self.abort()
            self._on_error(exc)
            return
        if self._watch_fd >= 0:  # a wait ended
            self._unwatch()
            self._on_drained()
        after, self._after = self._after, None
        if after is not None:
            after()

    def _send(self, c: FileChunk) -> bool:
        """True once ``c`` was sent whole; False when the socket is full (the rest waits)."""
        fd = self._sock_fd
        if fd is None:
            fd = self._sock_fd = _sendfile_fd(self._transport)
        if fd >= 0 and not self._transport.get_write_buffer_size():
            size = c.size
            done = _sendfile(fd, c)
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
        if self._watch_fd < 0:
            assert self._sock_fd is not None and self._sock_fd >= 0
            # the transport owns the socket's fd (an event loop watches each fd once)
            self._watch_fd = os.dup(self._sock_fd)
            asyncio.get_running_loop().add_writer(self._watch_fd, self._pump)

    def _unwatch(self) -> None:
        fd, self._watch_fd = self._watch_fd, -1
        if fd >= 0:
            asyncio.get_running_loop().remove_writer(fd)
            os.close(fd)


def _sendfile_fd(transport: asyncio.Transport) -> int:
    """The socket's fd for sendfile, or -1: never past TLS, where sendfile would put the
    file's plaintext on an encrypted stream."""
    sock = transport.get_extra_info("socket")
    tls = transport.get_extra_info("sslcontext") is not None
    return sock.fileno() if sock is not None and not tls else -1
