"""Hand-written encoders for the two hot responses, Produce (v3-v13) and Fetch (v4-v18; from
v13 of each, a topic is its 16-byte id, KIP-516).

kio's writer costs ~25 us per Fetch response; these build the bytes with ``struct`` and keep
record data opaque: the Fetch encoder returns a list of buffers in which each partition's
records appear as the caller's own buffer object (no copy), ready for ``writelines``.
Byte-identical to kio's writer (tests/protocol/test_fast.py checks every version). With the
native core built, ``encode_produce_response`` is its produce_response
(_native/produce_encode.c), the Python encoder its twin (tests/native checks the two); the
native one declines (None) what the twin would refuse, and the twin then raises its error.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from tidelog._native import core

from .codec import write_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_DIVERGING = struct.Struct(">iq")
_PRODUCE_PART = struct.Struct(">ihqq")
_FETCH_PART = struct.Struct(">ihqq")

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class ProducePartitionResult:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()
    error_message: str | None = None


@dataclass(slots=True)
class FetchPartitionData:
    index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    # bytes-like, or any sized object the transport knows how to send (a file slice)
    records: Any = None
    # (epoch, end offset) for a follower whose log forked from the leader's (v12+ tag 0)
    diverging_epoch: tuple[int, int] | None = None
    # the replica a consumer should fetch from instead (v11+, KIP-392); -1: none
    preferred_read_replica: int = -1


def _string(out: bytearray, s: str | None, flexible: bool) -> None:
    if s is None:
        if flexible:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    data = s.encode()
    if flexible:
        write_uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def _array_len(out: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


# a flexible response (v9-v12) of one named topic with one partition and no record errors
# or message (librdkafka's every small produce): head, the topic's name, then the rest
_ONE_HEAD = struct.Struct(">iiBB")  # size, correlation id, no tags, one topic
_ONE_PART = struct.Struct(">BihqqqBBBBiB")  # one partition ... throttle, no tags
_NAMES: dict[str, bytes] = {}  # a topic name as a compact string
_NAMES_MAX = 10_000


def _one_partition(correlation_id: int, topic: str, p: ProducePartitionResult,
                   throttle_time_ms: int) -> bytes:
    name = _NAMES.get(topic)
    if name is None:
        if len(_NAMES) >= _NAMES_MAX:
            _NAMES.clear()
        out = bytearray()
        _string(out, topic, True)
        name = _NAMES[topic] = bytes(out)
    size = _ONE_HEAD.size + len(name) + _ONE_PART.size - 4
    return b"".join((
        _ONE_HEAD.pack(size, correlation_id, 0, 2), name,
        _ONE_PART.pack(2, p.index, p.error_code, p.base_offset, p.log_append_time,
                       p.log_start_offset, 1, 0, 0, 0, throttle_time_ms, 0)))


def encode_produce_response_py(
    correlation_id: int,
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[ProducePartitionResult]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """The twin of _native/produce_encode.c (the reference, and the path without it)."""
    flexible = version >= 9
    if 9 <= version < 13 and len(topics) == 1:
        topic, parts = topics[0]
        if len(parts) == 1 and type(topic) is str:
            p = parts[0]
            if not p.record_errors and p.error_message is None:
                return _one_partition(correlation_id, topic, p, throttle_time_ms)
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    _array_len(out, len(topics), flexible)
    for topic, parts in topics:
        if isinstance(topic, uuid.UUID):
            out += topic.bytes
        else:
            _string(out, topic, flexible)
        _array_len(out, len(parts), flexible)
        for p in parts:
            out += _PRODUCE_PART.pack(p.index, p.error_code, p.base_offset, p.log_append_time)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            if version >= 8:
                _array_len(out, len(p.record_errors), flexible)
                for batch_index, message in p.record_errors:
                    out += _I32.pack(batch_index)
                    _string(out, message, flexible)
                    if flexible:
                        out.append(0)
                _string(out, p.error_message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


# ``encode_produce_response(correlation_id, version, topics, throttle_time_ms=0) -> bytes``, a
# Produce response frame (its size first), v3-v13: the native encoder in one C call, which
# hands what it declines to the twin; the twin alone without the native core.
encode_produce_response: Callable[..., bytes]
if core is not None:
    core.produce_response_bind(uuid.UUID)
    core.produce_response_twin(encode_produce_response_py)
    encode_produce_response = core.encode_produce_response
else:
    encode_produce_response = encode_produce_response_py


def _fetch_partition(
    out: bytearray, chunks: list[Buffer], p: FetchPartitionData, version: int
) -> bytearray:
    """Append one partition; returns the bytearray that later bytes go to (a new one after
    records were emitted as their own chunk)."""
    flexible = version >= 12
    out += _FETCH_PART.pack(p.index, p.error_code, p.high_watermark, p.last_stable_offset)
    if version >= 5:
        out += _I64.pack(p.log_start_offset)
    aborted = p.aborted_transactions
    if aborted is None:
        if flexible:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
    else:
        _array_len(out, len(aborted), flexible)
        for producer_id, first_offset in aborted:
            out += _I64.pack(producer_id) + _I64.pack(first_offset)
            if flexible:
                out.append(0)
    if version >= 11:
        out += _I32.pack(p.preferred_read_replica)
    records = p.records
    if records is None:
        if flexible:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
    else:
        n = len(records) if not isinstance(records, memoryview) else records.nbytes
        if flexible:
            write_uvarint(out, n + 1)
        else:
            out += _I32.pack(n)
        if n:
            chunks.append(out)
            chunks.append(records)
            out = bytearray()
    if flexible:
        if p.diverging_epoch is None:
            out.append(0)
        else:  # one tagged field: 0, DivergingEpoch {epoch int32, end_offset int64, no tags}
            out += b"\x01\x00\x0d" + _DIVERGING.pack(*p.diverging_epoch) + b"\x00"
    return out


class EncodedPartitions(NamedTuple):
    """A topic's ``n`` partitions in response order: runs of ``quiet_partition`` bytes
    (of the response's version) copied as they are, and partitions to encode."""

    n: int
    pieces: list[bytes | FetchPartitionData]


def quiet_partition(index: int, high_watermark: int, last_stable_offset: int,
                    log_start_offset: int, version: int) -> bytes:
    """One partition's bytes when it has nothing to send (no error, no records, no aborted
    transactions, no preferred replica), as ``encode_fetch_response`` writes it: the broker
    keeps them per partition and sends them as they are until the partition changes. The
    offsets packed in one call; what follows them is the same for every partition."""
    if version >= 5:
        head = _QUIET_HEAD.pack(index, 0, high_watermark, last_stable_offset, log_start_offset)
    else:
        head = _FETCH_PART.pack(index, 0, high_watermark, last_stable_offset)
    tail = _QUIET_TAILS.get(version)
    if tail is None:
        tail = _QUIET_TAILS[version] = quiet_partition_slow(0, 0, 0, 0, version)[len(head):]
    return head + tail


def quiet_partition_slow(index: int, high_watermark: int, last_stable_offset: int,
                         log_start_offset: int, version: int) -> bytes:
    """``quiet_partition`` through the encoder of every partition (the reference)."""
    out = bytearray()
    p = FetchPartitionData(index, 0, high_watermark, last_stable_offset, log_start_offset,
                           records=b"")
    _fetch_partition(out, [], p, version)
    return bytes(out)


_QUIET_HEAD = struct.Struct(">ihqqq")
_QUIET_TAILS: dict[int, bytes] = {}


def encode_fetch_response(
    correlation_id: int,
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionData] | EncodedPartitions]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> list[Any]:
    """The framed response as a list of buffers (size prefix included); each partition's
    records object is one element of the list, as given. Topics are names up to v12 and
    ids (UUID) from v13. A topic's partitions may come as ``EncodedPartitions``."""
    flexible = version >= 12
    chunks: list[Any] = []
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    out += _I32.pack(throttle_time_ms)
    if version >= 7:
        out += _I16.pack(error_code) + _I32.pack(session_id)
    _array_len(out, len(topics), flexible)
    for topic, parts in topics:
        if isinstance(topic, uuid.UUID):
            out += topic.bytes
        else:
            _string(out, topic, flexible)
        if isinstance(parts, EncodedPartitions):
            _array_len(out, parts.n, flexible)
            for piece in parts.pieces:
                if isinstance(piece, bytes):
                    out += piece
                else:
                    out = _fetch_partition(out, chunks, piece, version)
        else:
            _array_len(out, len(parts), flexible)
            for p in parts:
                out = _fetch_partition(out, chunks, p, version)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    chunks.append(out)
    total = sum(len(c) if not isinstance(c, memoryview) else c.nbytes for c in chunks)
    first = chunks[0]
    assert isinstance(first, bytearray)
    _I32.pack_into(first, 0, total - 4)
    return chunks
