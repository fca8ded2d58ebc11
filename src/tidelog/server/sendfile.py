"""Zero-copy Fetch: record data goes from the segment file to the socket with
``os.sendfile`` when the transport's write buffer is empty (the usual case for a consumer
that keeps up); otherwise, or for the part the kernel did not take, one ``pread``.

A ``FileChunk`` holds a *duplicate* of the segment's fd, so retention closing or deleting
the segment between the read and the send can never make us send another file's bytes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable
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


def _sendfile(sock_fd: int, chunk: FileChunk) -> int:
    """Bytes the kernel took without blocking (0 if it would block or is unsupported)."""
    sent = 0
    while sent < chunk.size:
        try:
            n = os.sendfile(sock_fd, chunk.fd, chunk.position + sent, chunk.size - sent)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        if n == 0:
            break
        sent += n
    return sent


def write_chunks(transport: asyncio.Transport, chunks: list[Any]) -> None:
    """Write buffers and FileChunks in order; every FileChunk is closed."""
    sock_fd: int | None = None  # looked up at the first FileChunk (a produce answer has none)
    pending: list[Any] = []
    try:
        for c in chunks:
            if not isinstance(c, FileChunk):
                pending.append(c)
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            if sock_fd is None:
                sock_fd = _sendfile_fd(transport)
            sent = 0
            if sock_fd >= 0 and transport.get_write_buffer_size() == 0:
                sent = _sendfile(sock_fd, c)
            if sent < c.size:
                data = os.pread(c.fd, c.size - sent, c.position + sent)
                if len(data) != c.size - sent:
                    raise OSError(f"segment shrank under a fetch ({len(data)} of {c.size - sent})")
                transport.write(data)
        if pending:
            transport.writelines(pending)
    finally:
        close_chunks(chunks)


def _sendfile_fd(transport: asyncio.Transport) -> int:
    """The socket's fd for sendfile, or -1: never past TLS, where sendfile would put the
    file's plaintext on an encrypted stream."""
    sock = transport.get_extra_info("socket")
    tls = transport.get_extra_info("sslcontext") is not None
    return sock.fileno() if sock is not None and not tls else -1
