"""What a client connection reads into (server/connection.py, an asyncio.BufferedProtocol).

The transport asks the connection for a buffer (``get_buffer``), receives into it and says
how much (``buffer_updated``). Two kinds are handed out: the loop thread's shared read buffer
(``read_buffer``), from which the connection cuts its frames and copies out the start of an
incomplete one; and, once the size of a large frame is read, the rest of that frame's own
buffer (``LargeFrame.rest``), so the kernel copies its bytes straight into place and nothing
copies them again (a Produce's records are views of it). Hand-written: asyncio's protocols
give the buffer interface, not a frame reader that keeps a frame's bytes where they landed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidelog._native import core as _native_core

# Frames this large are read into a buffer of their own size (kept below the default
# sasl.server.max.receive.size cap, so SASL tokens never take this path)
LARGE_FRAME = 1 << 20
# Every Produce frame is decoded in place (protocol/produce_in_place.py: kio would copy
# every partition's records out of the frame, bench/native.py section 3); one of this size
# or more that is still arriving is read into a buffer of its own size
PRODUCE_IN_PLACE = 64 << 10
# The read buffer every connection of a loop's thread reads into when no large frame is
# arriving (asyncio's own read size): a connection keeps only the bytes of a frame still
# incomplete, so an idle one holds none. Shared safely: a transport calls get_buffer, fills
# the buffer and calls buffer_updated in one go, and buffer_updated copies out what it keeps.
READ_BUFFER = 256 << 10
# After a large frame, the next read takes this much of the read buffer: the next frame's
# size and start, so a large frame that follows is received into place from there on (a full
# read buffer there copied up to a quarter of each 1 MB frame twice)
HEAD_READ = 4 << 10
_THREAD = threading.local()
# A large frame's buffer: not zeroed when the native core is built (the socket fills every
# byte before the frame is read; zeroing it cost a pass over the frame)
_frame_buffer: Callable[[int], bytearray] = (
    _native_core.frame_buffer if _native_core is not None else bytearray)


def read_buffer() -> tuple[bytearray, memoryview, memoryview]:
    """This thread's shared read buffer, a view of it and a view of its first HEAD_READ
    bytes (made on first use)."""
    made: tuple[bytearray, memoryview, memoryview] | None = getattr(_THREAD, "read_buffer",
                                                                    None)
    if made is None:
        buf = bytearray(READ_BUFFER)
        view = memoryview(buf)
        made = _THREAD.read_buffer = (buf, view, view[:HEAD_READ])
    return made


class LargeFrame:
    """A large frame (LARGE_FRAME bytes and more, or an in-place Produce), read into one
    buffer of its size.

    Growing the read buffer to a 100 MB frame and slicing the frame out of it cost three
    times the frame in memory; here the transport receives the rest of the frame straight
    into place (``rest``, handed over by ``get_buffer``: no copy of its own), and the frame
    is decoded from a view of that buffer (a Produce's records stay views of it).
    """

    __slots__ = ("buf", "filled", "size")

    def __init__(self, size: int, head: bytes | bytearray | memoryview, start: int,
                 end: int) -> None:
        self.buf = _frame_buffer(size)
        self.size = size
        self.filled = 0
        with memoryview(head) as mv:
            self.feed(mv[start:end])

    def rest(self) -> memoryview:
        """The part still to arrive, for the transport to receive into."""
        return memoryview(self.buf)[self.filled :]

    def feed(self, data: bytes | memoryview) -> memoryview | None:
        """Copy in what belongs to this frame; the bytes after it once complete, else None."""
        n = min(len(data), len(self.buf) - self.filled)
        with memoryview(self.buf) as dst, memoryview(data) as src:
            dst[self.filled : self.filled + n] = src[:n]
            self.filled += n
            if self.filled < len(self.buf):
                return None
            return memoryview(bytes(src[n:]))  # usually empty: a client rarely pipelines

    def frame(self) -> memoryview:
        return memoryview(self.buf)  # writable: a Produce's records are patched in place
