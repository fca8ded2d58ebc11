"""Cleaner: one compaction round over one log (Kafka's Cleaner), behaviours #132-#139.

1. Build the offset map (key -> latest offset) over the dirty range
   [first dirty, first uncleanable); stop when it reaches slots x load factor. The round ends
   at ``map.latest_offset + 1`` (#132, #139).
2. Group the segments below that end so each group fits one segment (#137).
3. For each group, copy the kept batches into ``<base>.log.cleaned`` through a LogSegment
   (so its indexes are built as for any segment), flush it, give it the group's last mtime,
   and swap it in (#138, see swap.py).

A record is kept iff its offset is past the map's latest offset, or it has a key, is the
latest for that key, and is not a tombstone whose delete horizon has passed (#133, #134).
Batches keep their offsets and producer fields; an emptied batch stays as a header when it
holds an active producer's last sequence or ends the round (#135). Aborted transactional
data and discardable markers go per #136.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.records import RecordBatch
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from ..index.txn_index import AbortedTxn
from ..log_file_utils import CLEANED_FILE_SUFFIX
from ..segment import LogSegment

if TYPE_CHECKING:
    from ..log import Log
from .batch_filter import (
    BatchRetention,
    BatchRetentionResult,
    FilterResult,
    ScannedRecord,
    filter_batch,
    scan_records,
)
from .batch_runs import FilterParams, FilterRun, SegmentReader, filter_run, map_run
from .errors import LogCleaningAbortedError, ThreadShutdownError
from .offset_map import SkimpyOffsetMap
from .swap import FaultHook, delete_cleaned_files, replace_segments
from .throttler import Throttler
from .transactions import CleanedTransactionMetadata

__all__ = ["Cleaner", "CleanerStats", "LogCleaningAbortedError", "LogToClean",
           "ThreadShutdownError", "group_segments_by_size"]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


@dataclass
class CleanerStats:
    """Kafka's CleanerStats (the figures the cleaner logs after a round)."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0
    elapsed_secs: float = 0.0  # wall time of the clean (LogCleaner's max-clean-time-secs)


@dataclass
class LogToClean:
    """A candidate log with its dirty range and byte counts (#128, #129)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    needs_compaction_now: bool = False
    clean_bytes: int = field(init=False)
    first_uncleanable_offset: int = field(init=False)
    cleanable_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        segs = self.log.segments
        self.clean_bytes = sum(s.size for s in segs.values(-1, self.first_dirty_offset))
        self.first_uncleanable_offset, self.cleanable_bytes = calculate_cleanable_bytes(
            self.log, self.first_dirty_offset, self.uncleanable_offset)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def calculate_cleanable_bytes(lg: Log, first_dirty: int, uncleanable: int) -> tuple[int, int]:
    """(base of the first uncleanable segment, bytes of the segments before it from the dirty
    one)."""
    segs = lg.segments
    non_active = segs.non_active_log_segments_from(uncleanable)
    first_uncleanable = (non_active[0] if non_active else segs.active_segment).base_offset
    lo = min(first_dirty, first_uncleanable)
    cleanable = sum(s.size for s in segs.values(lo, first_uncleanable))
    return first_uncleanable, cleanable


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose total log, offset-index and time-index sizes stay within
    the limits and whose offsets fit one segment's relative range (#137)."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            if (log_size + s.size > max_size
                    or index_size + s.offset_index.size_in_bytes > max_index_size
                    or time_size + s.time_index.size_in_bytes > max_index_size):
                break
            last = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                    else first_uncleanable - 1)
            if s.size != 0 and last - group[0].base_offset > INT32_MAX:
                break
            group.append(s)
            log_size += s.size
            index_size += s.offset_index.size_in_bytes
            time_size += s.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def collect_aborted_transactions(lg: Log, start: int, upper: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [start, upper) from the segments' txn indexes."""
    segs = lg.segments
    first = segs.floor_segment(start)
    if first is None:
        return []
    out: list[AbortedTxn] = []
    for seg in [first, *segs.higher_segments(first.base_offset)]:
        result = seg.txn_index.collect_aborted_txns(start, upper)
        out.extend(result.aborted_transactions)
        if result.is_complete:
            break
    return out


@dataclass(frozen=True, slots=True)
class LastRecord:
    last_data_offset: int | None
    producer_epoch: int


def last_data_offsets(producers: Mapping[int, LastRecord]) -> dict[int, int]:
    """Producer id -> last data offset, of the producers that have one (for runs)."""
    return {pid: r.last_data_offset for pid, r in producers.items()
            if r.last_data_offset is not None}


def last_records_of_active_producers(lg: Log) -> dict[int, LastRecord]:
    out: dict[int, LastRecord] = {}
    for pid, entry in lg.producer_state.active_producers.items():
        off = entry.last_data_offset
        out[pid] = LastRecord(off if off >= 0 else None, entry.producer_epoch)
    return out


class _CleanerFilter:
    """The RecordFilter of one cleaning pass (Kafka's anonymous filter in cleanInto)."""

    def __init__(self, offset_map: SkimpyOffsetMap, txn: CleanedTransactionMetadata,
                 producers: Mapping[int, LastRecord], upper_bound: int, current_time: int,
                 delete_retention_ms: int, stats: CleanerStats,
                 last_data: dict[int, int] | None = None) -> None:
        self.offset_map = offset_map
        self.txn = txn
        self.producers = producers
        self.upper_bound = upper_bound
        self.current_time = current_time
        self.delete_retention_ms = delete_retention_ms
        self.stats = stats
        self.group_end = -1  # next offset after the group's last batch
        self._discard_records = False
        self._is_control = False
        self._latest = offset_map.latest_offset
        self._params: FilterParams | None = None  # for runs; made once group_end is known
        self._last_data = last_data  # producer id -> last data offset (runs), else from producers

    def run(self, buf: memoryview, off: int, budget: int, result: FilterResult) -> FilterRun:
        """The run of plain batches at ``off`` (batch_runs.filter_run) into ``result``."""
        if self._params is None:
            last_data = self._last_data if self._last_data is not None else \
                last_data_offsets(self.producers)
            self._params = FilterParams(self.offset_map.latest_offset, self.current_time,
                                        self.current_time + self.delete_retention_ms,
                                        self.upper_bound, self.group_end, last_data)
        run = filter_run(self.offset_map, buf, off, self._params, budget, result.max_timestamp)
        if run.batches:
            self.txn.on_plain_batches_read(run.last_offset)
            self.stats.invalid_messages_read += run.invalid
            result.bytes_read += run.bytes_read
            result.messages_read += run.messages_read
            result.output += run.output
            result.messages_retained += run.messages_retained
            result.bytes_retained += run.bytes_retained
            if run.shallow_offset is not None:
                result.max_timestamp = run.max_timestamp
                result.shallow_offset_of_max_timestamp = run.shallow_offset
            result.max_offset = max(result.max_offset, run.max_offset)
        return run

    def _is_last_batch_of_producer(self, batch: RecordBatch) -> bool:
        last = self.producers.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.is_control and batch.producer_epoch == last.producer_epoch

    def check_batch_retention(self, batch: RecordBatch) -> BatchRetentionResult:
        can_discard = self.txn.should_discard_batch(batch)
        self._is_control = batch.is_control
        self._latest = self.offset_map.latest_offset
        if self._is_control:
            horizon = batch.delete_horizon_ms
            self._discard_records = (can_discard and horizon is not None
                                     and horizon <= self.current_time)
        else:
            self._discard_records = can_discard
        if batch.has_producer_id and self._is_last_batch_of_producer(batch):
            retention = BatchRetention.RETAIN_EMPTY
        elif batch.next_offset in (self.upper_bound, self.group_end):
            # Keep the round's last offset on disk (Kafka) and, beyond Kafka, the group's last
            # one: a `.swap` then spans every segment it replaces, so the loader's completion
            # of an interrupted swap deletes all of them (never resurrects a replaced one).
            retention = BatchRetention.RETAIN_EMPTY
        elif self._discard_records:
            retention = BatchRetention.DELETE
        else:
            retention = BatchRetention.DELETE_EMPTY
        return BatchRetentionResult(retention, can_discard and batch.is_control)

    def should_retain_record(self, batch: RecordBatch, record: ScannedRecord) -> bool:
        # Per record: batch-level facts were cached by check_batch_retention.
        if self._discard_records:
            return False
        if self._is_control:
            return True
        offset, _ts, key, has_value = record[:4]
        if offset > self._latest:
            return True
        if key is None:
            self.stats.invalid_messages_read += 1
            return False
        if offset < self.offset_map.get(key):
            return False
        if has_value:
            return True
        horizon = batch.delete_horizon_ms
        return horizon is None or self.current_time < horizon

    def retain_records(self, batch: RecordBatch, records: list[ScannedRecord]
                       ) -> list[ScannedRecord]:
        """``should_retain_record`` over a whole batch, with one offset-map call for the keys
        it must look up (same result, same stats)."""
        if self._discard_records:
            return []
        if self._is_control:
            return list(records)
        latest = self._latest
        found = iter(self.offset_map.get_many(
            [r[2] for r in records if r[0] <= latest and r[2] is not None]))
        horizon = batch.delete_horizon_ms
        tombstones_kept = horizon is None or self.current_time < horizon
        kept = []
        for r in records:
            offset, _ts, key, has_value = r[:4]
            if offset > latest:
                kept.append(r)
            elif key is None:
                self.stats.invalid_messages_read += 1
            elif offset >= next(found) and (has_value or tombstones_kept):
                kept.append(r)
        return kept


class Cleaner:
    """Cleans one log at a time with one offset map (one per cleaner thread)."""

    def __init__(
        self,
        cleaner_id: int,
        offset_map: SkimpyOffsetMap,
        *,
        dup_buffer_load_factor: float,
        io_buffer_size: int,
        throttler: Throttler,
        clock: Clock,
        check_done: Callable[[TopicPartition | None], None] = lambda _tp: None,
        fault: FaultHook | None = None,
    ) -> None:
        if offset_map.slots * dup_buffer_load_factor <= 1:
            raise ValueError(
                "offset map is too small to fit in even a single message, so log cleaning will "
                "never make progress. You can increase log.cleaner.dedupe.buffer.size or "
                "decrease log.cleaner.threads")
        self.id = cleaner_id
        self.offset_map = offset_map
        self.dup_buffer_load_factor = dup_buffer_load_factor
        self.io_buffer_size = max(io_buffer_size, 1)
        self.throttler = throttler
        self.clock = clock
        self.check_done = check_done
        self.fault = fault

    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        """Clean the log; returns (the next first dirty offset, stats)."""
        return self.do_clean(cleanable, self.clock.milliseconds())

    def do_clean(self, cleanable: LogToClean, current_time: int) -> tuple[int, CleanerStats]:
        lg = cleanable.log
        stats = CleanerStats()
        upper = cleanable.first_uncleanable_offset
        self.build_offset_map(lg, cleanable.first_dirty_offset, upper, stats)
        end_offset = max(self.offset_map.latest_offset + 1, cleanable.first_dirty_offset)
        segments = lg.segments.values(0, end_offset) if end_offset > 0 else []
        groups = group_segments_by_size(segments, lg.config.segment_bytes,
                                        lg.config.segment_index_bytes, upper)
        txn = CleanedTransactionMetadata()
        for group in groups:
            self.clean_segments(lg, group, current_time, stats, txn, upper)
        stats.buffer_utilization = self.offset_map.utilization
        return end_offset, stats

    # -- offset map --------------------------------------------------------------------------
    def build_offset_map(self, lg: Log, start: int, end: int, stats: CleanerStats) -> None:
        """Key -> latest offset over [start, end), until the map is full (#132)."""
        m = self.offset_map
        m.clear()
        dirty = lg.segments.values(start, end) if start < end else []
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(collect_aborted_transactions(lg, start, end))
        max_entries = m.max_entries(self.dup_buffer_load_factor)
        for i, seg in enumerate(dirty):
            self.check_done(lg.topic_partition)
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(seg, start, next_start, max_entries, txn, stats):
                log.debug("Offset map for %s is full at segment %d", lg.name, seg.base_offset)
                return

    def _map_segment(self, seg: LogSegment, start: int, next_start: int, max_entries: int,
                     txn: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
        """Map one segment's records from ``start``; True if the map filled up. Runs of plain
        batches go through ``map_run``, any other batch through ``_map_batch``."""
        m = self.offset_map
        pos = seg.offset_index.lookup(start).position
        if m.native is None:  # the Python core: the reference code's own loop is faster
            for batch in seg.log.batches(pos, validate=True):
                if self._map_batch(batch, start, max_entries, txn, stats):
                    return True
        elif self._map_runs(seg, pos, start, max_entries, txn, stats):
            return True
        # Offsets missing at the segment's end belong to this round too (gaps are skipped).
        m.update_latest_offset(max(m.latest_offset, next_start - 1))
        return False

    def _map_runs(self, seg: LogSegment, pos: int, start: int, max_entries: int,
                  txn: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
        """``_map_segment`` on the native core: runs of plain batches, the reference code for
        any other batch; True if the map filled up."""
        reader = SegmentReader(seg.log)
        while True:
            if reader.may_be_plain(pos):
                if (chunk := reader.chunk(pos)) is None:
                    break
                buf, off = chunk
                run = map_run(self.offset_map, buf, off, start, max_entries)
                if run.batches:
                    # Throttled per run, as Kafka throttles per read buffer.
                    self.throttler.maybe_throttle(run.bytes)
                    stats.map_bytes_read += run.bytes
                    stats.map_messages_read += run.read
                    txn.on_plain_batches_read(run.last_offset)
                    if run.full:
                        return True
                    pos += run.end - off
                    continue
            one = reader.batch(pos)
            if one is None:
                break
            if self._map_batch(one, start, max_entries, txn, stats):
                return True
            pos += one.size_in_bytes
        return False

    def _map_batch(self, batch: RecordBatch, start: int, max_entries: int,
                   txn: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
        """One batch into the map (the reference code); True if the map filled up."""
        m = self.offset_map
        self.throttler.maybe_throttle(batch.size_in_bytes)
        stats.map_bytes_read += batch.size_in_bytes
        if batch.is_control:
            txn.on_control_batch_read(batch)
            stats.map_messages_read += 1
        elif txn.on_batch_read(batch):
            stats.map_messages_read += max(0, batch.records_count)  # aborted: not mapped
        else:
            read, full = m.put_records(scan_records(batch)[1], start, max_entries)
            stats.map_messages_read += read
            if full:
                return True
        if batch.last_offset >= start:
            m.update_latest_offset(batch.last_offset)
        return False

    # -- cleaning ----------------------------------------------------------------------------
    def clean_segments(self, lg: Log, segments: list[LogSegment], current_time: int,
                       stats: CleanerStats, txn: CleanedTransactionMetadata,
                       upper_bound: int) -> None:
        """Write the group's kept batches to one ``.cleaned`` segment and swap it in."""
        base = segments[0].base_offset
        delete_cleaned_files(lg.dir, base)
        cleaned = LogSegment.open(lg.dir, base, lg.config, self.clock,
                                  file_suffix=CLEANED_FILE_SUFFIX)
        txn.cleaned_index = cleaned.txn_index
        try:
            producers = last_records_of_active_producers(lg)
            last_data = last_data_offsets(producers)  # once per group, not per segment
            # The `.cleaned` segment is served only once swapped in: its index entries are
            # written once at the end of the group, not with one open per entry.
            with cleaned.offset_index.deferred_writes(), cleaned.time_index.deferred_writes():
                for i, seg in enumerate(segments):
                    nxt = segments[i + 1].base_offset if i + 1 < len(segments) \
                        else seg.read_next_offset()
                    txn.add_aborted_transactions(
                        collect_aborted_transactions(lg, seg.base_offset, nxt))
                    flt = _CleanerFilter(self.offset_map, txn, producers, upper_bound,
                                         current_time, lg.config.delete_retention_ms, stats,
                                         last_data)
                    if i == len(segments) - 1:
                        flt.group_end = nxt
                    self.clean_into(lg.topic_partition, seg, cleaned, flt, stats)
            cleaned.on_becoming_inactive()
            cleaned.flush()
            cleaned.set_last_modified(segments[-1].last_modified_ms())
            log.info("Swapping in cleaned segment %s for %s in %s", cleaned,
                     [s.base_offset for s in segments], lg.name)
            replace_segments(lg, cleaned, segments, self.fault)
        except Exception:
            # Only real errors tidy up; a crash (or a simulated one) leaves the files for the
            # loader, which is exactly what the crash tests check.
            if cleaned.has_suffix(CLEANED_FILE_SUFFIX):
                cleaned.close_handlers()
                delete_cleaned_files(lg.dir, base)
            raise

    def clean_into(self, tp: TopicPartition | None, source: LogSegment, dest: LogSegment,
                   flt: _CleanerFilter, stats: CleanerStats) -> None:
        """Filter ``source``'s batches into ``dest``, in chunks of about the I/O buffer. Runs
        of plain batches go through ``flt.run``, any other batch through ``filter_batch``."""
        result = FilterResult()
        last_offset = -1
        if self.offset_map.native is None:  # the Python core: the reference code's own loop
            for batch in source.log.batches(0, validate=True):
                if filter_batch(batch, flt, result) is not None:
                    last_offset = batch.last_offset
                if result.bytes_read >= self.io_buffer_size:
                    self._flush_chunk(tp, dest, result, last_offset, stats)
                    result = FilterResult()
            self._flush_chunk(tp, dest, result, last_offset, stats)
        else:
            self._clean_runs(tp, source, dest, flt, stats)

    def _clean_runs(self, tp: TopicPartition | None, source: LogSegment, dest: LogSegment,
                    flt: _CleanerFilter, stats: CleanerStats) -> None:
        """``clean_into`` on the native core: runs of plain batches, ``filter_batch`` for any
        other batch."""
        result = FilterResult()
        last_offset = -1
        reader = SegmentReader(source.log)
        pos = 0
        while True:
            run = None
            if reader.may_be_plain(pos):
                if (chunk := reader.chunk(pos)) is None:
                    break
                buf, off = chunk
                run = flt.run(buf, off, self.io_buffer_size - result.bytes_read, result)
            if run is not None and run.batches:
                pos += run.end - off
                if run.last_written is not None:
                    last_offset = run.last_written
            else:
                one = reader.batch(pos)
                if one is None:
                    break
                if filter_batch(one, flt, result) is not None:
                    last_offset = one.last_offset
                pos += one.size_in_bytes
            if result.bytes_read >= self.io_buffer_size:
                self._flush_chunk(tp, dest, result, last_offset, stats)
                result = FilterResult()
        self._flush_chunk(tp, dest, result, last_offset, stats)

    def _flush_chunk(self, tp: TopicPartition | None, dest: LogSegment, result: FilterResult,
                     last_offset: int, stats: CleanerStats) -> None:
        self.check_done(tp)
        self.throttler.maybe_throttle(result.bytes_read)
        stats.bytes_read += result.bytes_read
        stats.messages_read += result.messages_read
        stats.messages_written += result.messages_retained
        if result.output:
            dest.append(max(result.max_offset, last_offset), result.max_timestamp,
                        result.shallow_offset_of_max_timestamp, result.output)
            stats.bytes_written += len(result.output)
            self.throttler.maybe_throttle(len(result.output))
            if self.fault is not None:
                self.fault("writing")  # crash tests: a partly written `.cleaned` segment
