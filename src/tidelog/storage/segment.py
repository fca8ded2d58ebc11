"""LogSegment: a `.log` file plus its `.index`, `.timeindex` and `.txnindex` (Kafka's LogSegment).

Files are named after the base offset, zero-padded to 20 digits. Appends add a sparse index
entry once more than ``index.interval.bytes`` were written since the last one; reads look up
the offset index and scan forward over batch headers only; ``recover`` rebuilds every index
from the `.log` and cuts it at the first invalid batch.
"""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from tidelog.records.errors import CorruptRecordError, InvalidRecordError
from tidelog.util.clock import Clock
from tidelog.util.slotted import slotted_maker

from .errors import LogSegmentOffsetOverflowError
from .file_records import (
    FileRecords,
    FileSlice,
    LogOffsetPosition,
    TimestampAndOffset,
    batch_metas,
)
from .index.offset_index import OffsetIndex
from .index.time_index import TimeIndex, TimestampOffset
from .index.txn_index import AbortedTxn, TransactionIndex
from .log_file_utils import (
    log_file,
    offset_index_file,
    replace_suffix,
    time_index_file,
    transaction_index_file,
)
from .recovery_scan import RecoveryScan

if TYPE_CHECKING:
    from .leader_epoch import LeaderEpochFileCache
    from .producer_state import ProducerStateManager

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
INT64_MIN = -(2**63)
NO_TIMESTAMP = -1
APPEND_FROM_FILE_CHUNK = 1024 * 1024
POSITION_UNKNOWN = -1  # pass as max_position: the bound is unknown, return metadata only
UNKNOWN_TIMESTAMP_OFFSET = TimestampOffset(NO_TIMESTAMP, -1)
_new_timestamp_offset = slotted_maker(TimestampOffset)  # (one per append: no Python __new__)

class SegmentSettings(Protocol):
    """What a segment needs from a config (LogConfig satisfies it): read only."""

    @property
    def index_interval_bytes(self) -> int: ...

    @property
    def segment_index_bytes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentConfig:
    """The segment-level settings, for callers without a full LogConfig."""

    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    preallocate: bool = False


class LogOffsetMetadata(NamedTuple):
    """An offset with the base offset and byte position of the segment that holds it
    (a NamedTuple: one is built per fetch)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position_in_segment == -1


@dataclass(slots=True)
class FetchDataInfo:
    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


def random_segment_jitter(config: Any) -> int:
    """A jitter in [0, min(segment.jitter.ms, segment.ms)) drawn per segment (Kafka)."""
    jitter = int(getattr(config, "segment_jitter_ms", 0) or 0)
    if jitter <= 0:
        return 0
    seg_ms = int(getattr(config, "segment_ms", jitter))
    return random.randrange(max(1, min(jitter, seg_ms)))


@dataclass(slots=True)
class _Tracking:
    """Mutable per-segment state that truncation and recovery reset."""

    max_timestamp_and_offset: TimestampOffset = UNKNOWN_TIMESTAMP_OFFSET
    bytes_since_last_index_entry: int = 0
    rolling_based_timestamp: int | None = None
    created: int = 0


class LogSegment:
    __slots__ = ("_t", "base_offset", "clock", "index_interval_bytes", "log", "offset_index",
                 "roll_jitter_ms", "time_index", "txn_index")  # (read natively: log_plain)

    def __init__(
        self,
        log_records: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        base_offset: int,
        *,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Clock,
    ) -> None:
        self.log = log_records
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.clock = clock
        self._t = _Tracking(created=clock.milliseconds())

    @classmethod
    def open(
        cls,
        dir: str | os.PathLike[str],
        base_offset: int,
        config: SegmentSettings,
        clock: Clock,
        file_suffix: str = "",
        preallocate: bool = False,
        *,
        init_file_size: int | None = None,
        roll_jitter_ms: int | None = None,
    ) -> LogSegment:
        """Open (or create) the segment at ``base_offset`` in ``dir``. Index files are created
        only when first used. A new preallocated `.log` gets ``init_file_size`` bytes
        (default: the config's segment_bytes)."""
        d = Path(dir)
        if init_file_size is None:
            init_file_size = int(getattr(config, "segment_bytes", 0)) if preallocate else 0
        max_index = config.segment_index_bytes
        records = FileRecords.open(
            log_file(d, base_offset, file_suffix), preallocate=preallocate, init_size=init_file_size
        )
        return cls(
            records,
            OffsetIndex(offset_index_file(d, base_offset, file_suffix), base_offset, max_index),
            TimeIndex(time_index_file(d, base_offset, file_suffix), base_offset, max_index),
            TransactionIndex(base_offset, transaction_index_file(d, base_offset, file_suffix)),
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            roll_jitter_ms=random_segment_jitter(config) if roll_jitter_ms is None else roll_jitter_ms,
            clock=clock,
        )

    # -- properties ------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size_in_bytes

    @property
    def created(self) -> int:
        return self._t.created

    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        # Loaded lazily from the time index so opening many segments stays cheap.
        if self._t.max_timestamp_and_offset == UNKNOWN_TIMESTAMP_OFFSET:
            self._t.max_timestamp_and_offset = self.time_index.last_entry
        return self._t.max_timestamp_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.timestamp

    @property
    def shallow_offset_of_max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.offset

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if the segment has none (retention)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms()

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment {self.log.path} "
                f"with base offset {self.base_offset}"
            )

    # -- append ----------------------------------------------------------------------------
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Write validated batches (whole batches only, checked before writing); the first
        batch of each index interval gets an offset- and time-index entry."""
        if len(records) == 0:
            return
        metas = batch_metas(records, self.log.path)
        physical_position = self.log.size_in_bytes
        self._ensure_offset_in_range(largest_offset)
        if physical_position == 0:
            self._t.rolling_based_timestamp = largest_timestamp
        self.log.append(records)
        t = self._t
        mx = self.max_timestamp_and_offset_so_far
        for last_offset, max_ts, size in metas:
            if max_ts > mx.timestamp:
                mx = t.max_timestamp_and_offset = TimestampOffset(max_ts, last_offset)
            if t.bytes_since_last_index_entry > self.index_interval_bytes:
                self.offset_index.append(last_offset, physical_position)
                self.time_index.maybe_append(mx.timestamp, mx.offset)
                t.bytes_since_last_index_entry = 0
            physical_position += size
            t.bytes_since_last_index_entry += size

    def plain_room(self, size: int, position: int, last_offset: int, now: int,
                   max_segment_bytes: int, max_segment_ms: int) -> int | None:
        """For one batch of ``size`` bytes up to ``last_offset`` written at ``position``, the
        end of the `.log` (storage/log_plain.py): the highest max timestamp it may carry
        without ``should_roll`` holding (an int64), or None when it holds whatever the
        timestamp, the segment is empty (its first batch sets the roll time) or an index is
        not open yet (the reference path opens it once the batch is valid)."""
        oi, ti = self.offset_index, self.time_index  # (``is_full`` inline, ti's last kept)
        if position == 0 or position > max_segment_bytes - size or \
                position > INT32_MAX - size or \
                not 0 <= last_offset - self.base_offset <= INT32_MAX or \
                not (oi._loaded and oi._entries < oi._max_entries) or \
                not (ti._loaded and ti._entries < ti._max_entries - 1):
            return None
        limit = max_segment_ms - self.roll_jitter_ms
        t = self._t
        if t.rolling_based_timestamp is None:
            self._load_first_batch_timestamp()
        ts = t.rolling_based_timestamp
        if ts is not None and ts >= 0:  # rolls when max timestamp - ts > limit
            bound = ts + limit
            return None if bound < INT64_MIN else bound if bound < LONG_MAX else LONG_MAX
        return None if now - t.created > limit else LONG_MAX

    def appended(self, size: int, position: int, last_offset: int, max_timestamp: int) -> None:
        """``append``'s bookkeeping (size, max timestamp, index entries) of a batch of ``size``
        bytes up to ``last_offset`` written at ``position``, the end (storage/log_plain.py)."""
        self.log.size_in_bytes += size  # (the caller wrote it at the end)
        t = self._t
        mx = t.max_timestamp_and_offset
        if mx == UNKNOWN_TIMESTAMP_OFFSET:
            mx = self.max_timestamp_and_offset_so_far
        if max_timestamp > mx.timestamp:
            mx = t.max_timestamp_and_offset = _new_timestamp_offset(max_timestamp, last_offset)
        if t.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(mx.timestamp, mx.offset)
            t.bytes_since_last_index_entry = 0
        t.bytes_since_last_index_entry += size

    def append_from_file(self, records: FileRecords, start: int) -> int:
        """Copy batches from ``records`` at ``start`` until one whose last offset cannot be
        made relative to this segment; returns the bytes copied (in ~1 MiB appends, so a
        segment split never holds a whole segment in memory)."""
        chunk_start = end = start
        largest_offset, largest_ts, offset_of_max = -1, NO_TIMESTAMP, -1
        for h in records.headers(start):
            if not self.can_convert_to_relative_offset(h.last_offset):
                break
            end = h.position + h.size
            largest_offset = h.last_offset
            if h.max_timestamp > largest_ts:
                largest_ts, offset_of_max = h.max_timestamp, h.last_offset
            if end - chunk_start >= APPEND_FROM_FILE_CHUNK:
                self.append(largest_offset, largest_ts, offset_of_max,
                            records.read_at(chunk_start, end - chunk_start))
                chunk_start = end
        if end > chunk_start:
            self.append(largest_offset, largest_ts, offset_of_max,
                        records.read_at(chunk_start, end - chunk_start))
        return end - start

    def update_txn_index(self, aborted: AbortedTxn) -> None:
        self.txn_index.append(aborted)

    # -- read ------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """Position and size of the first batch whose last offset is >= ``offset``."""
        return self.log.find_batch(self.offset_index, offset, starting_file_position)

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Bytes from the batch holding ``start_offset``: at most ``max_size`` and never past
        ``max_position`` (default: the segment size; POSITION_UNKNOWN: metadata only).
        None if the offset is beyond the segment's last offset."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log.path}")
        found = self.log.find_batch(self.offset_index, start_offset)  # translate_offset
        if found is None:
            return None
        start_position = found.position
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start_position)
        adjusted_max_size = max(max_size, found.size) if min_one_message else max_size
        if max_position is None:
            max_position = self.size
        if adjusted_max_size == 0 or max_position < 0:
            return FetchDataInfo(metadata, FileSlice.empty())
        fetch_size = min(max_position - start_position, adjusted_max_size)
        return FetchDataInfo(
            metadata,
            self.log.slice(start_position, max(fetch_size, 0)),
            first_entry_incomplete=adjusted_max_size < found.size,
        )

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset if empty)."""
        start = self.translate_offset(self.offset_index.last_offset)
        if start is None:
            return self.base_offset
        next_offset = self.base_offset
        for h in self.log.headers(start.position):
            next_offset = h.next_offset
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        start = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, start)).position
        return self.log.search_for_timestamp(timestamp, position, start)

    def read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        return self.max_timestamp_and_offset_so_far

    # -- recovery and truncation -----------------------------------------------------------
    def recover(self, producer_state: ProducerStateManager | None = None,
                leader_epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Rebuild the indexes from the `.log`, validating each batch (size, magic, CRC,
        offset range); cut the file at the first invalid byte. Returns the bytes removed."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        t = self._t
        t.max_timestamp_and_offset = TimestampOffset(NO_TIMESTAMP, -1)
        t.bytes_since_last_index_entry = 0
        # The rebuilt entries are written once at the end (one open per index, not one per
        # entry); the segment is not served while it recovers.
        with self.offset_index.deferred_writes(), self.time_index.deferred_writes():
            truncated = self._recover_scan(producer_state, leader_epoch_cache)
            mx = self.max_timestamp_and_offset_so_far
            self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
        t.bytes_since_last_index_entry = 0  # as Kafka: appends after recovery start afresh
        self.offset_index.trim()
        self.time_index.trim()
        return truncated

    def _recover_scan(self, producer_state: ProducerStateManager | None,
                      leader_epoch_cache: LeaderEpochFileCache | None) -> int:
        """Walk the batches (storage/recovery_scan.py), appending index entries; cut the
        `.log` at the first invalid byte. Returns the bytes removed."""
        scan = RecoveryScan(self, producer_state, leader_epoch_cache)
        try:
            scan.run()
        except (CorruptRecordError, InvalidRecordError) as e:
            log.warning(
                "Found invalid messages in log segment %s at byte offset %d: %s",
                self.log.path, scan.valid_bytes, e,
            )
        valid_bytes = scan.valid_bytes
        truncated = self.log.size_in_bytes - valid_bytes
        if truncated > 0:
            log.debug("Truncated %d invalid bytes at the end of segment %s", truncated, self.log.path)
            self.log.truncate_to(valid_bytes)
        return truncated

    def ensure_offset_in_range(self, offset: int) -> None:
        self._ensure_offset_in_range(offset)

    def set_max_timestamp_and_offset(self, value: TimestampOffset) -> None:
        self._t.max_timestamp_and_offset = value

    def truncate_to(self, offset: int) -> int:
        """Remove data and index entries at or above ``offset``; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # The active segment keeps growing after a truncation: give the indexes room again.
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping.position)
        t = self._t
        if self.log.size_in_bytes == 0:
            t.created = self.clock.milliseconds()
            t.rolling_based_timestamp = None
        t.bytes_since_last_index_entry = 0
        if self.max_timestamp_so_far >= 0:
            t.max_timestamp_and_offset = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        last_entry = self.time_index.last_entry
        position = self.offset_index.lookup(last_entry.offset).position
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last_entry.timestamp:
            return TimestampOffset(after.timestamp, after.offset)
        return last_entry

    # -- roll ------------------------------------------------------------------------------
    def _load_first_batch_timestamp(self) -> None:
        if self._t.rolling_based_timestamp is None:
            for h in self.log.headers(0):
                self._t.rolling_based_timestamp = h.max_timestamp
                break

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch, LONG_MAX if empty or without timestamps."""
        self._load_first_batch_timestamp()
        ts = self._t.rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else LONG_MAX

    get_first_batch_timestamp = first_batch_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """Record time since the first batch if it has a timestamp, else wall time since
        the segment was created."""
        self._load_first_batch_timestamp()
        ts = self._t.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self._t.created

    def should_roll(
        self,
        *,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now: int,
    ) -> bool:
        """Kafka's roll conditions for an incoming append (size, time minus jitter, either
        index full, relative-offset overflow)."""
        size = self.size
        return (  # (the time, which may read the first batch, last)
            size > max_segment_bytes - messages_size
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
            or (size > 0 and self.time_waited_for_roll(now, max_timestamp_in_messages)
                > max_segment_ms - self.roll_jitter_ms)
        )

    def on_becoming_inactive(self) -> None:
        """Rolled away from: write the final time-index entry and trim all three files."""
        mx = self.max_timestamp_and_offset_so_far
        self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()
        self.log.trim()

    on_becoming_inactive_segment = on_becoming_inactive

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def sanity_check(self, time_index_file_newly_created: bool = False) -> None:
        """Kafka's load-time check: the offset index must exist (else FileNotFoundError)."""
        if not self.offset_index.file_exists():
            raise FileNotFoundError(f"Offset index file {self.offset_index.path} does not exist")
        if time_index_file_newly_created:
            self.time_index.resize(0)
        self.txn_index.sanity_check()

    def sanity_check_indexes(self) -> None:
        """Full index checks (CorruptIndexError): for loaders that rebuild bad indexes."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    # -- files -----------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all files (e.g. "" -> ".deleted") without creating missing index files."""
        self.log.rename_to(replace_suffix(self.log.path, old_suffix, new_suffix))
        self.offset_index.rename_to(replace_suffix(self.offset_index.path, old_suffix, new_suffix))
        self.time_index.rename_to(replace_suffix(self.time_index.path, old_suffix, new_suffix))
        self.txn_index.rename_to(replace_suffix(self.txn_index.path, old_suffix, new_suffix))

    def has_suffix(self, suffix: str) -> bool:
        return str(self.log.path).endswith(suffix)

    def update_parent_dir(self, parent: Path) -> None:
        self.log.update_parent_dir(parent)
        self.offset_index.update_parent_dir(parent)
        self.time_index.update_parent_dir(parent)
        self.txn_index.update_parent_dir(parent)

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    def set_last_modified(self, ms: int) -> None:
        self.log.set_last_modified(ms)
        if self.offset_index.file_exists():
            os.utime(self.offset_index.path, ns=(ms * 1_000_000, ms * 1_000_000))
        if self.time_index.file_exists():
            os.utime(self.time_index.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def close(self) -> None:
        mx = self._t.max_timestamp_and_offset
        if mx.timestamp >= 0:
            self.time_index.maybe_append(mx.timestamp, mx.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.log.close()
        self.txn_index.close()

    def close_handlers(self) -> None:
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.log.close_handlers()
        self.txn_index.close()

    def delete(self) -> None:
        """Close and remove every file of the segment (missing ones are fine)."""
        self.log.delete()
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    delete_if_exists = delete

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"
