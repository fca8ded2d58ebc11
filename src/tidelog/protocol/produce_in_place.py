"""Produce requests decoded without copying their records.

kio's reader copies each ``records`` field into a new ``bytes``: a 100 MB record then lives
twice (frame and copy), and the validator, which patches offsets in place, needs a third,
writable copy. Here the records of each partition are writable views of the frame itself, so
the frame is the only copy from the socket to the segment file. Every Produce frame takes
this path (server/connection.py reads it into a writable buffer of its own); every field is
read as kio reads it (v3-v13, flexible from v9, topic ids from v13), and tagged fields are
skipped (Produce defines none).

Hand-written with ``struct`` and inline varints rather than through kio's reader and the
bounds guard (protocol/guard.py): a Produce of one record is the broker's most frequent
request (librdkafka sends one partition per request), and the generic path cost several
times this one per request. Each length is checked against the frame before it is used, so
a frame that lies about a length is refused (InvalidRequestError) before anything is sized
from it.
"""

from __future__ import annotations

import datetime
import functools
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tidelog._native import core

from .codec import InvalidRequestError, RequestHeader, parse_header, request_class

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_SIZE = struct.Struct(">ii")  # a classic partition: index, then the records' length
_NO_ID = bytes(16)


@dataclass(slots=True)
class PartitionProduceData:
    """A partition of a Produce (kio's field names): its records, a view of the frame."""

    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    """A topic of a Produce: named up to v12, by id from v13 (the other field None)."""

    name: str | None
    topic_id: uuid.UUID | None
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(slots=True)
class ProduceRequest:
    """A decoded Produce (kio's field names; plain slotted classes: made for every
    request, kio's frozen ones cost several times as much). The timeout is kept in ms as
    read (``timeout_ms``); ``timeout`` gives kio's timedelta when asked."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.timeout_ms)


@functools.cache
def _header_version(version: int) -> int:
    return 2 if request_class(0, version).__header_schema__.__version__ >= 2 else 1


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most five bytes (Kafka's readUnsignedVarint)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise InvalidRequestError(f"varint too long at byte {pos}")


def _need(pos: int, n: int, end: int) -> None:
    if n < 0 or pos + n > end:
        raise InvalidRequestError(f"field of {n} bytes at byte {pos} runs past the end ({end})")


def _skip_tags(buf: memoryview, pos: int, end: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        _need(pos, size, end)
        pos += size
    return pos


def _string(buf: memoryview, pos: int, end: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        n = buf[pos] - 1
        if n < 0x7F:
            pos += 1
        else:
            n, pos = _uvarint(buf, pos)
            n -= 1
    else:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
    if n < 0:
        return None, pos
    _need(pos, n, end)
    return str(buf[pos:pos + n], "utf-8"), pos + n


def _array_len(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n = buf[pos] - 1
        if n < 0x7F:
            pos += 1
        else:
            n, pos = _uvarint(buf, pos)
            n -= 1
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:  # Produce has no nullable arrays
        raise InvalidRequestError(f"null array at byte {pos}")
    return n, pos


def decode_produce_in_place_py(frame: memoryview, version: int
                               ) -> tuple[RequestHeader, ProduceRequest]:
    """The twin of _native/produce_decode.c (the reference, and the path without it)."""
    header, pos = parse_header(frame, _header_version(version))
    try:
        request = _body(frame, pos, version)
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise InvalidRequestError(f"cannot decode ProduceRequest v{version}: {exc!r}") from exc
    return header, request


def _body(buf: memoryview, pos: int, version: int) -> ProduceRequest:
    flexible = version >= 9
    end = len(buf)
    txn_id, pos = _string(buf, pos, end, flexible)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    n_topics, pos = _array_len(buf, pos + 6, flexible)
    topics = []
    for _ in range(n_topics):
        name = topic_id = None
        if version >= 13:
            _need(pos, 16, end)
            raw = bytes(buf[pos:pos + 16])
            topic_id = None if raw == _NO_ID else uuid.UUID(bytes=raw)  # as kio reads it
            pos += 16
        else:
            name, pos = _string(buf, pos, end, flexible)
        n_parts, pos = _array_len(buf, pos, flexible)
        parts = []
        for _ in range(n_parts):
            part, pos = _partition(buf, pos, end, flexible)
            parts.append(part)
        topics.append(TopicProduceData(name, topic_id, tuple(parts)))
        if flexible:
            pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos, end)
    if flexible and buf[pos] != 0:
        _skip_tags(buf, pos, end)
    return ProduceRequest(txn_id, acks, timeout_ms, tuple(topics))


def _partition(buf: memoryview, pos: int, end: int, flexible: bool
               ) -> tuple[PartitionProduceData, int]:
    """A partition's index and records (a view of the frame), and the position after it."""
    if flexible:
        (index,) = _I32.unpack_from(buf, pos)
        size = buf[pos + 4]
        if size < 0x80:
            pos += 5
        else:
            size, pos = _uvarint(buf, pos + 4)
        size -= 1
    else:
        index, size = _INDEX_SIZE.unpack_from(buf, pos)
        pos += 8
    records = None
    if size >= 0:
        _need(pos, size, end)
        records = buf[pos:pos + size]
        pos += size
    if flexible:
        pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos, end)
    return PartitionProduceData(index, records), pos


# ``decode_produce_in_place(frame, version) -> (header, request)``, whose records are writable
# views of ``frame``: the native decoder in one C call (every Produce takes it), which hands a
# frame it declines to the twin (whose own InvalidRequestError is then raised); the twin alone
# without the native core.
decode_produce_in_place: Callable[[memoryview, int], tuple[RequestHeader, ProduceRequest]]
if core is not None:
    core.produce_decode_bind(RequestHeader, ProduceRequest, TopicProduceData,
                             PartitionProduceData, uuid.UUID, decode_produce_in_place_py)
    decode_produce_in_place = core.produce_decode_in_place
else:
    decode_produce_in_place = decode_produce_in_place_py
