"""The read side of a Log (Kafka's LocalLog.read and UnifiedLog.fetchOffsetByTimestamp).

Reads never take the Log's lock: they work on a snapshot list of segments and on offset
metadata (offset, segment base, byte position) that appends publish atomically, so a read
never sees a batch past the bound its isolation level allows.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from .errors import OffsetOutOfRangeError, StorageError
from .file_records import FileSlice, TimestampAndOffset
from .index.txn_index import AbortedTxn, TxnIndexSearchResult
from .leader_epoch import LeaderEpochFileCache
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
POSITION_UNKNOWN = -1


class FetchIsolation(enum.Enum):
    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class ReadBounds(NamedTuple):
    """What one read may see: the log's start/end and the isolation bound (a tuple: one is
    made per partition of every Fetch)."""

    log_start_offset: int
    end: LogOffsetMetadata  # log end offset with its position
    max_offset: LogOffsetMetadata  # the isolation level's bound with its position


def offset_metadata(segments: LogSegments, offset: int, end: LogOffsetMetadata) -> LogOffsetMetadata:
    """Offset -> (offset, segment base, byte position of the batch holding it)."""
    if offset >= end.message_offset:
        return end
    seg = segments.floor_segment(offset)
    if seg is None:
        return LogOffsetMetadata(offset)
    found = seg.translate_offset(offset)
    if found is None:
        nxt = segments.higher_segment(seg.base_offset)
        if nxt is None:
            return LogOffsetMetadata(offset, seg.base_offset, seg.size)
        return LogOffsetMetadata(offset, nxt.base_offset, 0)
    return LogOffsetMetadata(offset, seg.base_offset, found.position)


def read(
    segments: LogSegments,
    bounds: ReadBounds,
    start_offset: int,
    max_length: int,
    *,
    min_one_message: bool,
    include_aborted: bool,
    path: object,
) -> FetchDataInfo:
    """Behaviours #55-#59: out-of-range errors, isolation bound, whole batches, gaps.
    ``path`` names the log in errors (formatted only for one)."""
    end = bounds.end
    if start_offset < bounds.log_start_offset or start_offset > end.message_offset:
        raise OffsetOutOfRangeError(
            f"Received request for offset {start_offset} for partition {path}, but we only "
            f"have log segments upto {end.message_offset} and log start offset "
            f"{bounds.log_start_offset}."
        )
    bound = bounds.max_offset
    if start_offset >= bound.message_offset:  # nothing to read (most partitions of a
        # consumer's sessionless Fetch): answered without a segment lookup
        meta = bound if start_offset == bound.message_offset else offset_metadata(
            segments, start_offset, end)
        return empty_read(meta, include_aborted)
    seg = segments.last_segment  # a consumer reads the active segment: no lock, no search
    if seg is None or start_offset < seg.base_offset:
        seg = segments.floor_segment(start_offset)
    if seg is None:
        raise OffsetOutOfRangeError(f"No segment holds offset {start_offset} in {path}")
    while seg is not None:
        if seg.base_offset < bound.segment_base_offset:
            max_pos = seg.size
        elif seg.base_offset == bound.segment_base_offset:
            max_pos = bound.relative_position_in_segment
        else:
            max_pos = POSITION_UNKNOWN
        info = seg.read(start_offset, max_length, max_pos, min_one_message)
        if info is not None:
            if max_pos == POSITION_UNKNOWN:
                info.records = FileSlice.empty()
            if include_aborted:
                info.aborted_transactions = _aborted_txns(
                    segments, seg, start_offset, end.message_offset)
            return info
        seg = segments.higher_segment(seg.base_offset)
    return empty_read(end, include_aborted)


_HEAD = struct.Struct(">qi4xb")  # a batch's base offset, length; its magic


def read_at_position(segments: LogSegments, log_start_offset: int, bound: LogOffsetMetadata,
                     start_offset: int, max_length: int, segment_base: int, position: int,
                     copy_limit: int) -> bytes | None:
    """What ``read`` answers for ``start_offset`` (records, up to ``bound``), read in one
    ``pread`` when the caller knows where its batch starts: at ``position`` in the segment
    at ``segment_base`` (where the high watermark stood when it last read this log: a
    consumer reading on from there). None, for ``read`` to answer, unless all of it is
    simple: the offset in range and below the bound, the bound in that segment and that
    segment the active one, the bytes up to the bound within ``max_length`` and
    ``copy_limit`` (larger ones go to ``read``, whose slice may be sent from the file), no
    entry in that segment's transaction index (so a read_committed ``read`` of the same
    bytes lists no aborted transaction: while the LSO is the bound, the answer is its
    answer too), and the batch found at ``position`` one that starts at ``start_offset`` (a
    log truncated since holds other bytes there). No error is raised here: ``read`` raises
    it."""
    if not log_start_offset <= start_offset < bound.message_offset or \
            bound.segment_base_offset != segment_base:
        return None
    seg = segments.last_segment
    size = bound.relative_position_in_segment - position
    if seg is None or seg.base_offset != segment_base or position < 0 or \
            not _HEAD.size <= size <= min(max_length, copy_limit) or \
            not seg.txn_index.is_empty:
        return None
    try:
        data = os.pread(seg.log.fileno(), size, position)
    except (OSError, ValueError, StorageError):  # closed, or a disk error: ``read`` tells
        return None
    if len(data) != size:
        return None
    base, length, magic = _HEAD.unpack_from(data)
    if base != start_offset or magic != 2 or not 0 < length <= size - 12:
        return None
    return data


_NOTHING = FileSlice.empty()  # never changed: every empty read may share it


def empty_read(meta: LogOffsetMetadata, include_aborted: bool) -> FetchDataInfo:
    """A read that found nothing, ending at ``meta``."""
    return FetchDataInfo(meta, _NOTHING, False, [] if include_aborted else None)


def _aborted_txns(segments: LogSegments, seg: LogSegment, start: int, leo: int) -> list[AbortedTxn]:
    """Kafka's collectAbortedTransactions: the aborted transactions overlapping ``start`` up
    to the segment after ``seg``, searched from the floor segment of ``start`` on through
    every later segment until one entry's last stable offset reaches that bound. An aborted
    transaction is indexed in the segment its abort marker went to, which may be a later
    one than its records' (a transaction that rolled the log). A read in the active segment
    (a consumer's) has no later segment to search: that segment's entries alone, and none
    without asking the sorted segments when its index has none."""
    if seg is segments.last_segment and seg.base_offset <= start:  # its own floor
        if seg.txn_index.is_empty:
            return []
        return collect_aborted_txns((seg,), start, leo).aborted_transactions
    nxt = segments.higher_segment(seg.base_offset)
    upper = nxt.base_offset if nxt is not None else leo
    first = segments.floor_segment(start) or seg
    return collect_aborted_txns((first, *segments.higher_segments(first.base_offset)), start,
                                upper).aborted_transactions


def collect_aborted_txns(segments: Iterable[LogSegment], start: int, upper: int
                         ) -> TxnIndexSearchResult:
    """The aborted transactions overlapping [start, upper) in the transaction indexes of
    ``segments`` (in offset order), searched until an entry's last stable offset reaches
    ``upper`` (then complete): Kafka's collectAbortedTransactions walk, which a remote read
    ends with over the local segments (collectAbortedTransactionInLocalSegments)."""
    out: list[AbortedTxn] = []
    for s in segments:
        if s.txn_index.is_empty:
            continue
        result = s.txn_index.collect_aborted_txns(start, upper)
        out.extend(result.aborted_transactions)
        if result.is_complete:
            return TxnIndexSearchResult(out, True)
    return TxnIndexSearchResult(out, False)


# -- ListOffsets -------------------------------------------------------------------------------
def fetch_offset_by_timestamp(
    segments: LogSegments, timestamp: int, *, log_start_offset: int, log_end_offset: int,
    epochs: LeaderEpochFileCache,
) -> TimestampAndOffset | None:
    """Behaviours #68-#73: earliest/latest/max-timestamp specials, else the time index."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        first = epochs.earliest_entry()
        epoch = first.epoch if first is not None and first.start_offset <= log_start_offset \
            else None
        return TimestampAndOffset(-1, log_start_offset, epoch)
    if timestamp == LATEST_TIMESTAMP:
        return TimestampAndOffset(-1, log_end_offset, epochs.latest_epoch())
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return TimestampAndOffset(-1, -1, -1)
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp(segments, log_start_offset)
    if timestamp < 0:
        return None
    for seg in segments.values():
        if seg.max_timestamp_so_far >= timestamp:
            found = seg.find_offset_by_timestamp(timestamp, max(log_start_offset, seg.base_offset))
            if found is not None:
                return found
    return None


def _max_timestamp(segments: LogSegments, log_start_offset: int) -> TimestampAndOffset | None:
    best: LogSegment | None = None
    for seg in segments.values():
        if seg.max_timestamp_so_far >= 0 and (
                best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
            best = seg
    if best is None:
        return None
    return best.find_offset_by_timestamp(best.max_timestamp_so_far,
                                         max(log_start_offset, best.base_offset))
