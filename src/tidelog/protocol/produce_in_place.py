"""Produce requests of large frames decoded without copying their records.

kio's reader copies each ``records`` field into a new ``bytes``: a 100 MB record then lives
twice (frame and copy), and the validator, which patches offsets in place, needs a third,
writable copy. Here the records of each partition are writable views of the frame itself, so
the frame is the only copy from the socket to the segment file. Only the connection's large
frames take this path; every field is read as kio reads it (v3-v13, flexible from v9, topic
ids from v13), and tagged fields are skipped (Produce defines none).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

from .codec import InvalidRequestError, RequestHeader, parse_header, read_uvarint, request_class
from .kio_util import nested

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class _Reader:
    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRequestError(f"field of {n} bytes at byte {self.pos} overruns the frame")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def _length(self) -> int:
        """A (compact) length; -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            return n - 1
        return self.i16()

    def string(self) -> str | None:
        n = self._length()
        return None if n < 0 else bytes(self._take(n)).decode("utf-8")

    def records(self) -> memoryview | None:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        else:
            n = self.i32()
        return None if n < 0 else self._take(n)

    def array_len(self) -> int:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        else:
            n = self.i32()
        if n < 0:
            raise InvalidRequestError(f"null array at byte {self.pos}")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        count, self.pos = read_uvarint(self.buf, self.pos)
        for _ in range(count):
            _tag, self.pos = read_uvarint(self.buf, self.pos)
            size, self.pos = read_uvarint(self.buf, self.pos)
            self._take(size)


def decode_produce_in_place(frame: memoryview, version: int) -> tuple[RequestHeader, Any]:
    """A ProduceRequest (kio's class) whose ``records`` are writable views of ``frame``."""
    cls = request_class(0, version)
    header_version = 2 if cls.__header_schema__.__version__ >= 2 else 1
    header, pos = parse_header(frame, header_version)
    r = _Reader(frame, pos, flexible=version >= 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    try:
        txn_id = r.string()
        acks = r.i16()
        timeout = datetime.timedelta(milliseconds=r.i32())
        topics = []
        for _ in range(r.array_len()):
            key: dict[str, Any] = (
                {"topic_id": uuid.UUID(bytes=bytes(r._take(16)))} if version >= 13
                else {"name": r.string()}
            )
            parts = []
            for _ in range(r.array_len()):
                index = r.i32()
                parts.append(pcls(index=index, records=r.records()))
                r.skip_tags()
            topics.append(tcls(**key, partition_data=tuple(parts)))
            r.skip_tags()
        r.skip_tags()
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise InvalidRequestError(f"cannot decode ProduceRequest v{version}: {exc!r}") from exc
    request = cls(transactional_id=txn_id, acks=acks, timeout=timeout, topic_data=tuple(topics))
    return header, request
