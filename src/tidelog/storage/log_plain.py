"""The leader's plain append: the common Produce in one native call.

An uncompressed batch under the inline write size (``inline_below``: a larger one is
written off the loop) from a plain or idempotent client (not starting a transaction), to a
log with no write in flight, written on the caller's thread, needing no roll and no new
leader epoch: ``append_plain`` checks the producer's sequence from the header, then one call
(the native core's ``append_plain``, or its twin ``append_plain_py``) checks the batch as the
validator's plain path does (storage/validator.py ``validate_plain``), patches its base offset,
leader epoch, max timestamp and CRC, and writes it at the end of the active segment; the
segment's size and index entries, the log end offset and the producer's last batches follow
here. It gives the same answer, bytes, files and state as ``Log.append_as_leader`` for every
batch it takes; anything else (a duplicate, a sequence or epoch error, a first batch of a
producer, a segment or epoch to start, a batch the check declines) it leaves untouched for
the reference path, which gives Kafka's answer or error. When the native core is built, the
whole of it (the gate, the sequence, the segment's room, the write, the bookkeeping) is one
C call, ``append_leader`` (_native/append_leader.c), whose twin is
``append_plain_leader_py`` here: it reads and sets the same attributes in the same order,
a slotted class's fields at their offsets.

Measured with bench/produce_path.py (one 100 B record per idempotent acks=all Produce, under
callgrind): 288 k instructions per request against 354 k for the reference path alone, the
build before it in the same sitting; 267 k against 290 k once this path (one room check per
index, the end offset from the write's position), the high watermark's move and the Produce
layers above it made 225 Python calls per request instead of 258; 192 k against 232-234 k
(one partition; 241 k against 279 k over 1,000) once the Produce took this path through
``Log.append_plain_as_leader`` (no writer, callback or future unless it declines), with one
coroutine per request and 166 Python calls instead of 201; 109 k against 137 k (one
partition; 106 k against 135 k over 1,000) once a request's objects were made without their
Python ``__init__`` (util/slotted.py), the native calls took METH_FASTCALL arguments and the
log's config, sizes and high watermark became plain attributes (86 Python calls instead of
108, builtins included); 82.8 k against 100.1 k (one partition; 80.8 k against 97.8 k over
1,000) once this path's bookkeeping became ``append_leader`` and the layers above it merged
(51 Python calls instead of 70); 76.2-76.7 k against 83.4-83.6 k (one partition; 75.2 k
against 80.9 k over 1,000) once it read the log, its segments, indexes and producer state
at their slots' offsets and wrote the index entries natively (``index_entries``, twin
``index_entries_py``).
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

from tidelog._native import core as _native_core
from tidelog.records import NO_SEQUENCE, crc32c
from tidelog.records.batch import NO_PRODUCER_ID, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_MASK
from tidelog.util.clock import SystemClock
from tidelog.util.slotted import slotted_maker

from .index.offset_index import OffsetIndex
from .index.time_index import TimeIndex, TimestampOffset
from .leader_epoch import LeaderEpochFileCache
from .local_log import LocalLog
from .log_append import LogAppendInfo
from .producer_state import (
    INT_MAX,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
)
from .segment import UNKNOWN_TIMESTAMP_OFFSET, LogOffsetMetadata
from .validator import plain_check_py

if TYPE_CHECKING:
    from tidelog.config.log_config import LogConfig

    from .file_records import FileRecords

Buffer = bytes | bytearray | memoryview

# The native call computes the CRC in one stream; of a larger batch it is given the CRC the
# crc32c package computed (three streams interleaved).
PLAIN_APPEND_BYTES = 64 * 1024
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# attributes, last offset delta, producer id, producer epoch, base sequence
_FIELDS = struct.Struct(">21xhi16xqhi")
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
# (made without their Python __init__/__new__: util/slotted.py)
_new_batch_metadata = slotted_maker(BatchMetadata)
_new_info = slotted_maker(LogAppendInfo)
_new_offset_metadata = slotted_maker(LogOffsetMetadata)
_new_timestamp_offset = slotted_maker(TimestampOffset)


def append_plain_leader_py(local: LocalLog, psm: ProducerStateManager,
                           epochs: LeaderEpochFileCache, records: Buffer, leader_epoch: int,
                           inline_below: int, log_start_offset: int) -> LogAppendInfo | None:
    """A client's append written here as the reference path would write it, or None
    (nothing changed): the batch is not one this path takes. The caller holds the log's
    lock and has checked that the log is open. Raises the OSError of a failed write (as
    FileRecords.append raises it) or of an index entry. (``append_plain``: the native
    core's ``append_leader`` when built, this its twin.)"""
    n = len(records)
    if _declined(local, epochs, n, leader_epoch, inline_below):
        return None
    attrs, lod, pid, producer_epoch, base_seq = _FIELDS.unpack_from(records, 0)
    entry = None
    if pid > NO_PRODUCER_ID:
        entry = next_in_sequence(psm, pid, producer_epoch, base_seq, lod, attrs)
        if entry is None:
            return None
    offset = local.end_metadata.message_offset  # (``log_end_offset`` without a call)
    if offset > INT64_MAX - INT_MAX - 1:  # (no batch fits: the reference path refuses it)
        return None
    last = offset + lod
    seg = local.segments.last_segment  # (``active_segment`` without a call)
    if seg is None:
        return None
    position = seg.log.size_in_bytes
    now = local.clock.milliseconds()
    config = local.config
    bound = seg.plain_room(n, position, last, now, config.segment_bytes, config.max_segment_ms)
    if bound is None:
        return None
    got = _write(seg.log, records, offset, leader_epoch, config, now, bound, position)
    if got is None:
        return None
    count, max_ts = got
    seg.appended(n, position, last, max_ts)
    # (``local.appended`` inline: the log end offset past the batch)
    local.end_metadata = _new_offset_metadata(last + 1, seg.base_offset, position + n)
    if entry is not None:
        _add_batch(entry, (base_seq + lod) & INT_MAX, last, lod, max_ts)
    psm.last_map_offset = last + 1  # (update_map_end_offset)
    return _new_info(offset, last, max_ts, last, -1, log_start_offset, count, n)


def _declined(local: LocalLog, epochs: LeaderEpochFileCache, n: int, leader_epoch: int,
              inline_below: int) -> bool:
    """Whether the batch is, before its header is read, one this path leaves to the
    reference path: its size, a write in flight, plain appends off, a newer epoch."""
    if n >= inline_below or n < RECORD_BATCH_OVERHEAD or local.writes.count or \
            not local.config.plain_appends:
        return True
    if leader_epoch >= 0:  # (a batch starting a newer epoch: the reference path assigns it)
        known = epochs.live_entries  # (``latest_epoch`` without a call)
        if not known or leader_epoch > known[-1].epoch:
            return True
    return False


def _write(log_records: FileRecords, records: Buffer, offset: int, leader_epoch: int,
           config: LogConfig, now: int, bound: int, position: int) -> tuple[int, int] | None:
    """The batch checked, patched and written at ``position`` (``_append``): (records, max
    timestamp), or None (declined, nothing written)."""
    buf = records if isinstance(records, bytearray) or (
        isinstance(records, memoryview) and not records.readonly) else bytearray(records)
    crc = -1
    if len(records) > PLAIN_APPEND_BYTES:
        with memoryview(buf) as mv:
            crc = crc32c(mv[21:])
    fd = log_records.fd
    if fd is None:
        fd = log_records.fileno()  # (raises: the file is closed)
    lo = now - config.timestamp_before_max_ms  # (clamped without min/max: two calls)
    hi = now + config.timestamp_after_max_ms
    try:
        return _append(buf, offset, leader_epoch, lo if lo > INT64_MIN else INT64_MIN,
                       hi if hi < INT64_MAX else INT64_MAX, config.max_message_bytes,
                       config.compact, bound, fd, position, crc)
    except OSError as e:
        raise log_records.append_error(e, len(records)) from e


def _add_batch(entry: ProducerStateEntry, last_seq: int, last: int, lod: int,
               max_ts: int) -> None:
    """The producer's last batches and timestamp after the append (ProducerStateEntry)."""
    md = entry.batch_metadata
    md.append(_new_batch_metadata(last_seq, last, lod, max_ts))
    if len(md) > NUM_BATCHES_TO_RETAIN:
        md.popleft()
    entry.last_timestamp = max_ts


def next_in_sequence(psm: ProducerStateManager, pid: int, epoch: int, base_seq: int, lod: int,
                     attrs: int) -> ProducerStateEntry | None:
    """The producer's entry when a batch of these header fields is its next one, of its
    epoch, neither a duplicate nor starting or breaking a transaction; else None (the
    reference path: ProducerAppendInfo's checks and errors, a first batch's new entry)."""
    entry = psm.producers.get(pid)
    if entry is None or epoch != entry.producer_epoch or epoch < 0 or base_seq < 0:
        return None
    if bool(attrs & TRANSACTIONAL_MASK) != (entry.current_txn_first_offset is not None):
        return None
    md = entry.batch_metadata
    last_seq = md[-1].last_seq if md else NO_SEQUENCE  # (``in_sequence`` inline)
    if base_seq != last_seq + 1 and not (base_seq == 0 and last_seq == INT_MAX):
        return None
    last_seq = (base_seq + lod) & INT_MAX
    for m in md:  # (ProducerStateEntry.find_duplicate_batch)
        if m.last_seq == last_seq and m.first_seq == base_seq:
            return None
    return entry


def index_entries_py(offset_index: OffsetIndex, time_index: TimeIndex, last: int,
                     position: int, timestamp: int, offset: int) -> None:
    """A batch's index entries as ``LogSegment.appended`` adds them (the native core's
    ``index_entries``, which the native append adds them with, its twin)."""
    offset_index.append(last, position)
    time_index.maybe_append(timestamp, offset)


def append_plain_py(buf: bytearray | memoryview, offset: int, leader_epoch: int, lo: int,
                    hi: int, max_message_bytes: int, compact: bool, max_ts_bound: int,
                    fd: int, position: int, crc: int = -1) -> tuple[int, int] | None:
    """The batch in ``buf`` checked as ``validate_plain_py`` checks it, its max timestamp
    at most ``max_ts_bound``; then patched (base offset, leader epoch, max timestamp, CRC)
    and written to ``fd`` at ``position``: (records, max timestamp). None: declined, ``buf``
    untouched and nothing written. A failed write raises its OSError. ``crc``: the CRC-32C
    of ``buf[21:]`` when the caller has it (-1: computed here)."""
    if len(buf) < RECORD_BATCH_OVERHEAD:
        return None
    with memoryview(buf) as mv:
        got = plain_check_py(buf, crc32c(mv[21:]) if crc < 0 else crc, lo, hi,
                             max_message_bytes, compact)
        if got is None or got[1] > max_ts_bound:
            return None
        count, max_ts = got
        _Q.pack_into(buf, 0, offset)
        _I32.pack_into(buf, 12, leader_epoch)
        if _Q.unpack_from(buf, 35)[0] != max_ts:
            _Q.pack_into(buf, 35, max_ts)
            _U32.pack_into(buf, 17, crc32c(mv[21:]))
        written = os.pwrite(fd, mv, position)
        while written < len(buf):  # a short write (a nearly full disk): the rest
            w = os.pwrite(fd, mv[written:], position + written)
            if w == 0:
                raise OSError(5, "no progress writing the batch")  # (EIO, as the native)
            written += w
    return count, max_ts


# The native twins when built and not switched off: same results, same bytes, same refusals.
_append = _native_core.append_plain if _native_core is not None else append_plain_py
append_plain = append_plain_leader_py
if _native_core is not None:
    _native_core.append_leader_bind(_new_batch_metadata, _new_info, _new_offset_metadata,
                                    _new_timestamp_offset, UNKNOWN_TIMESTAMP_OFFSET, crc32c,
                                    SystemClock.milliseconds, OffsetIndex, TimeIndex)
    append_plain = _native_core.append_leader
index_entries = _native_core.index_entries if _native_core is not None else index_entries_py
