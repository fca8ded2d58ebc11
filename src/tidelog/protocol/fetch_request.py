"""Sessionless consumer Fetch requests (v4-v18) decoded into columns.

librdkafka does not use fetch sessions (KIP-227): every Fetch names each partition it reads,
1,000 of them for a consumer of 1,000 partitions, many times a second. kio's reader makes a
frozen object per partition (and the bounds guard walks each one first); here each topic's
partition entries are kept as the bytes they came in, which the broker's quiet-partition
scan reads where they are (server/quiet_table.py), with no Python object per partition;
columns (partition, current leader epoch, fetch offset, max bytes) are made with one
``struct`` call when something asks for them. kio has no columnar reader, hence this one.

Only the common shape takes this path: a consumer (replica id -1, no replica state), no
session (id 0, epoch -1), nothing forgotten, no tagged field anywhere, each partition once,
each topic once, and the frame ending where the body does. Anything else answers None and
goes through kio, as every other request does. The decoded object has kio's field names, so
whatever reads the request the usual way (fetch sessions, the error response) still can:
``topics[i].partitions`` is made on demand, with the fields that version has.
"""

from __future__ import annotations

import datetime
import functools
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tidelog._native import core

from .codec import InvalidRequestError, RequestHeader, parse_header

FETCH_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">iiib")  # max_wait, min_bytes, max_bytes, isolation_level
_SESSION = struct.Struct(">ii")


class _Layout(NamedTuple):
    """One version range's partition entry: its bytes, the struct format that reads
    (partition, [current_leader_epoch], fetch_offset, partition_max_bytes) of it, and where
    in the entry the current leader epoch (-1: none), the fetch offset and the max bytes
    are (the partition index is its first four bytes)."""

    size: int
    fmt: str
    epochs: bool  # v9+: current_leader_epoch present
    fields: tuple[str, ...]  # kio's field names at that version
    epoch_at: int
    offset_at: int
    max_at: int


_V4 = _Layout(16, "iqi", False, ("partition", "fetch_offset", "partition_max_bytes"), -1, 4,
              12)
_V5 = _Layout(24, "iq8xi", False,
              ("partition", "fetch_offset", "log_start_offset", "partition_max_bytes"), -1, 4,
              20)
_V9 = _Layout(28, "iiq8xi", True, ("partition", "current_leader_epoch", "fetch_offset",
                                   "log_start_offset", "partition_max_bytes"), 4, 8, 24)
# v12+: last_fetched_epoch, and one byte of tagged fields that must be 0 (none)
_V12 = _Layout(33, "iiq12xix", True, ("partition", "current_leader_epoch", "fetch_offset",
                                      "last_fetched_epoch", "log_start_offset",
                                      "partition_max_bytes"), 4, 8, 28)


# one entry of each layout, by its size
_ONE = {lay.size: struct.Struct(">" + lay.fmt) for lay in (_V4, _V5, _V9, _V12)}


def _layout(version: int) -> _Layout:
    if version >= 12:
        return _V12
    if version >= 9:
        return _V9
    return _V5 if version >= 5 else _V4


@functools.lru_cache(maxsize=256)
def _entries(layout: _Layout, n: int) -> struct.Struct:
    return struct.Struct(">" + layout.fmt * n)


# what a consumer's entry holds in the fields this reader skips, and the tagged fields'
# defaults (v17 replica_directory_id, v18 high_watermark)
_ABSENT: dict[str, int | None] = {"log_start_offset": -1, "last_fetched_epoch": -1,
                                  "replica_directory_id": None, "high_watermark": 2**63 - 1}


@functools.lru_cache(maxsize=16)
def _partition_class(version: int) -> tuple[Callable[..., Any], tuple[str, ...]]:
    """A partition entry with kio's field names of ``version`` (made only on demand)."""
    fields = _layout(version).fields + ("replica_directory_id",) * (version >= 17) + (
        "high_watermark",) * (version >= 18)
    cls = NamedTuple("FetchPartition", [(f, int | None) for f in fields])  # type: ignore[misc]
    return cls, fields


class FetchTopicColumns:
    """One topic of the request: ``topic`` (v4-v12) or ``topic_id`` (v13+), and its ``n``
    partitions in request order: their entries as they came (``raw``, ``layout``), read
    by the broker's quiet-partition scan where they are; as columns (partition index,
    current leader epoch, fetch offset, max bytes) made once asked for."""

    __slots__ = ("_columns", "_version", "layout", "n", "raw", "topic", "topic_id")

    def __init__(self, topic: str | None, topic_id: uuid.UUID | None, version: int,
                 raw: bytes, n: int) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self._version = version
        self.layout = _layout(version)
        self.raw = raw
        self.n = n
        self._columns: tuple[tuple[int, ...], ...] | None = None

    def entry(self, i: int) -> tuple[int, int, int, int]:
        """Partition ``i``: (partition index, current leader epoch or -1, fetch offset,
        max bytes), read in one call."""
        layout = self.layout
        one = _ONE[layout.size]
        if layout.epochs:
            return one.unpack_from(self.raw, i * layout.size)
        p, offset, max_bytes = one.unpack_from(self.raw, i * layout.size)
        return p, -1, offset, max_bytes

    def columns(self) -> tuple[tuple[int, ...], ...]:
        """(partition indexes, current leader epochs, fetch offsets, max bytes)."""
        if self._columns is None:
            layout, n = self.layout, self.n
            flat = _entries(layout, n).unpack_from(self.raw)
            if layout.epochs:
                self._columns = flat[0::4], flat[1::4], flat[2::4], flat[3::4]
            else:
                self._columns = flat[0::3], (-1,) * n, flat[1::3], flat[2::3]
        return self._columns

    @property
    def partition_ids(self) -> tuple[int, ...]:
        return self.columns()[0]

    @property
    def epochs(self) -> tuple[int, ...]:
        return self.columns()[1]

    @property
    def offsets(self) -> tuple[int, ...]:
        return self.columns()[2]

    @property
    def max_bytes(self) -> tuple[int, ...]:
        return self.columns()[3]

    @property
    def partitions(self) -> tuple[Any, ...]:
        """kio-shaped entries (for code that reads the request the usual way); a consumer's
        log start offset and last fetched epoch are -1."""
        cls, fields = _partition_class(self._version)
        values = {"partition": self.partition_ids, "current_leader_epoch": self.epochs,
                  "fetch_offset": self.offsets, "partition_max_bytes": self.max_bytes}
        n = self.n
        columns = [values[f] if f in values else (_ABSENT[f],) * n for f in fields]
        return tuple(cls(*row) for row in zip(*columns, strict=True))


class SessionlessFetch:
    """A consumer's sessionless FetchRequest, with kio's top-level field names."""

    __slots__ = ("isolation_level", "max_bytes", "max_wait", "min_bytes", "rack_id",
                 "topics", "version")

    replica_id = -1
    replica_state = None  # v15+: a consumer's (kio's entity holds replica id -1 there)
    session_id = 0
    session_epoch = -1
    forgotten_topics_data: tuple[Any, ...] = ()

    def __init__(self, version: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 isolation_level: int, topics: Sequence[FetchTopicColumns],
                 rack_id: str | None) -> None:
        self.version = version
        self.max_wait = datetime.timedelta(milliseconds=max_wait_ms)
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level
        self.topics = topics
        self.rack_id = rack_id


class _Short(Exception):
    """The frame is not the common shape (or is cut short): kio decides."""


class _Cursor:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > len(self.buf):
            raise _Short
        self.pos = pos + n
        return pos

    def byte(self) -> int:
        return int(self.buf[self.need(1)])

    def uvarint(self) -> int:
        shift = result = 0
        while shift <= 28:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise _Short

    def length(self, wide: struct.Struct) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return int(wide.unpack_from(self.buf, self.need(wide.size))[0])

    def string(self) -> str | None:
        n = self.length(_I16)
        if n < 0:
            return None
        start = self.need(n)
        return bytes(self.buf[start : start + n]).decode("utf-8")

    def no_tags(self) -> None:
        if self.flexible and self.byte() != 0:
            raise _Short


def decode_sessionless_fetch(frame: bytes | memoryview, version: int
                             ) -> tuple[RequestHeader, SessionlessFetch] | None:
    """The request in columns, or None when it is not a consumer's sessionless Fetch of the
    common shape (see the module docstring). Raises InvalidRequestError only for a header
    that cannot be read."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    header, pos = parse_header(frame, 2 if version >= 12 else 1)
    try:
        return header, _body(_Cursor(frame, pos, version >= 12), version)
    except (_Short, UnicodeDecodeError, struct.error):
        return None


def _body(c: _Cursor, version: int) -> SessionlessFetch:
    buf = c.buf
    if version < 15 and _I32.unpack_from(buf, c.need(4))[0] != -1:
        raise _Short  # a follower's
    max_wait, min_bytes, max_bytes, isolation = _HEAD.unpack_from(buf, c.need(_HEAD.size))
    if version >= 7 and _SESSION.unpack_from(buf, c.need(_SESSION.size)) != (0, -1):
        raise _Short  # a session's
    topics = [_topic(c, version) for _ in range(c.length(_I32))]
    keys = {t.topic_id if version >= 13 else t.topic for t in topics}
    if len(keys) != len(topics):
        raise _Short  # a topic named twice: kio's path merges them
    if version >= 7 and c.length(_I32) != 0:
        raise _Short  # forgotten topics
    rack = c.string() if version >= 11 else None
    c.no_tags()  # cluster_id, replica_state: kio's path
    if c.pos != len(buf):
        raise _Short
    return SessionlessFetch(version, max_wait, min_bytes, max_bytes, isolation, topics, rack)


_TOPIC_IDS: dict[bytes, uuid.UUID] = {}  # the ids consumers name, made once (UUIDs are immutable)


def _topic_id(raw: bytes) -> uuid.UUID:
    found = _TOPIC_IDS.get(raw)
    if found is None:
        if len(_TOPIC_IDS) >= 4096:  # ids a client made up stay few
            _TOPIC_IDS.clear()
        found = _TOPIC_IDS[raw] = uuid.UUID(bytes=raw)
    return found


def _topic(c: _Cursor, version: int) -> FetchTopicColumns:
    if version >= 13:
        start = c.need(16)
        topic, topic_id = None, _topic_id(bytes(c.buf[start : start + 16]))
    else:
        topic, topic_id = c.string(), None
        if topic is None:
            raise _Short
    n = c.length(_I32)
    if n <= 0:
        raise _Short  # kio's path skips a topic with no partition
    layout = _layout(version)
    start = c.need(layout.size * n)
    buf = c.buf
    if layout is _V12 and buf[start + 32 : start + 33 * n : 33] != bytes(n):
        raise _Short  # a partition with tagged fields (replica_directory_id...)
    out = FetchTopicColumns(topic, topic_id, version, bytes(buf[start : start + layout.size * n]),
                            n)
    if not _distinct(out):
        raise _Short  # a partition named twice
    c.no_tags()
    return out


def ids_distinct_py(raw: bytes, size: int) -> bool | None:
    """Whether the partition indexes of the ``size``-byte entries in ``raw`` are all
    different (the twin of the C one, which answers None where it cannot tell cheaply)."""
    ids = [_I32.unpack_from(raw, at)[0] for at in range(0, len(raw) - size + 1, size)]
    return len(set(ids)) == len(ids)


def _distinct(t: FetchTopicColumns) -> bool:
    found = _ids_distinct(t.raw, t.layout.size)
    return len(set(t.partition_ids)) == t.n if found is None else found


_ids_distinct = core.fetch_ids_distinct if core is not None else ids_distinct_py


__all__ = ["FetchTopicColumns", "InvalidRequestError", "SessionlessFetch",
           "decode_sessionless_fetch"]
