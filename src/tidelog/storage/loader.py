"""Startup of one partition directory (Kafka's LogLoader) and producer-state rebuilding.

Order of work, as Kafka: delete ``.deleted`` files, abort incomplete splits (``.swap`` at or
above the smallest ``.cleaned`` base), delete ``.cleaned``, complete interrupted swaps
(delete the segments they replace, drop the ``.swap`` suffix), delete orphan indexes, open
every segment (rebuilding missing or corrupt indexes), recover from the recovery point after
an unclean shutdown, then rebuild the producer state from snapshots plus the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatch
from tidelog.util.clock import Clock

from .errors import CorruptIndexError, InvalidOffsetError
from .leader_epoch import LeaderEpochFileCache
from .log_file_utils import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
)
from .producer_state import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateManager
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)

INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LoadedLogOffsets:
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


def open_segment(dir: Path, base_offset: int, config: LogConfig, clock: Clock,
                 **kwargs: Any) -> LogSegment:
    """LogSegment.open with a LogConfig (its frozen attributes satisfy SegmentSettings)."""
    return LogSegment.open(dir, base_offset, cast(Any, config), clock, **kwargs)


def _offset_of(path: Path) -> int | None:
    head = path.name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


class LogLoader:
    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        clock: Clock,
        segments: LogSegments,
        *,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        had_clean_shutdown: bool,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> None:
        self.dir = Path(dir)
        self.config = config
        self.clock = clock
        self.segments = segments
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.had_clean_shutdown = had_clean_shutdown
        self.producer_state = producer_state
        self.epochs = leader_epoch_cache or LeaderEpochFileCache(self.dir)
        self._recover_from = LONG_MAX

    def load(self) -> LoadedLogOffsets:
        swap_files = self._remove_temp_files_and_collect_swap_files()
        self._complete_swaps(swap_files)
        self.segments.close_handlers()
        self.segments.clear()
        self._load_segment_files()
        recovery_point, next_offset = self._recover_log()
        active = self.segments.active_segment
        active.resize_indexes(self.config.segment_index_bytes)
        first = self.segments.first_segment_base_offset or 0
        log_start = max(self.log_start_offset_checkpoint, first)
        if self.config.remote_storage_enable:  # Kafka: the remote start, below the first
            log_start = self.log_start_offset_checkpoint  # local segment once tiered
        self.epochs.truncate_from_end(next_offset)
        self.epochs.truncate_from_start(self.log_start_offset_checkpoint)
        psm = self.producer_state
        psm.remove_stray_snapshots(self.segments.base_offsets())
        rebuild_producer_state(psm, self.segments, log_start, next_offset, self.clock,
                               reload_from_clean_shutdown=self.had_clean_shutdown)
        return LoadedLogOffsets(
            log_start, recovery_point,
            LogOffsetMetadata(next_offset, active.base_offset, active.size),
        )

    # -- suffix state machine (#96, #97) -------------------------------------------------------
    def _files(self) -> list[Path]:
        return sorted(p for p in self.dir.iterdir() if p.is_file())

    def _remove_temp_files_and_collect_swap_files(self) -> list[Path]:
        min_cleaned = LONG_MAX
        swaps: list[Path] = []
        cleaned: list[Path] = []
        for f in self._files():
            name = f.name
            if name.endswith(DELETED_FILE_SUFFIX):
                f.unlink(missing_ok=True)
            elif name.endswith(CLEANED_FILE_SUFFIX):
                off = _offset_of(f)
                if off is not None:
                    min_cleaned = min(min_cleaned, off)
                cleaned.append(f)
            elif name.endswith(SWAP_FILE_SUFFIX):
                swaps.append(f)
        valid = []
        for f in swaps:
            off = _offset_of(f)
            if off is not None and off >= min_cleaned:
                log.info("Deleting %s: part of an incomplete split", f)
                f.unlink(missing_ok=True)
            else:
                valid.append(f)
        for f in cleaned:
            f.unlink(missing_ok=True)
        return valid

    def _complete_swaps(self, swap_files: list[Path]) -> None:
        lo, hi = LONG_MAX, -1
        for f in swap_files:
            if not f.name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                continue
            base = _offset_of(f)
            if base is None:
                continue
            seg = open_segment(self.dir, base, self.config, self.clock,
                               file_suffix=SWAP_FILE_SUFFIX)
            lo, hi = min(lo, base), max(hi, seg.read_next_offset())
            seg.close_handlers()
        for f in self._files():
            off = _offset_of(f)
            if f.name.endswith(SWAP_FILE_SUFFIX) or off is None:
                continue
            if lo <= off < hi:
                log.info("Deleting %s: replaced by an interrupted swap", f)
                f.unlink(missing_ok=True)
        for f in self._files():
            if f.name.endswith(SWAP_FILE_SUFFIX):
                f.rename(f.with_name(f.name[: -len(SWAP_FILE_SUFFIX)]))

    # -- segments ------------------------------------------------------------------------------
    def _first_recovered_base(self) -> int:
        """Base of the first segment _recover_log will recover (LONG_MAX after a clean stop)."""
        if self.had_clean_shutdown:
            return LONG_MAX
        bases = sorted(b for f in self._files() if f.name.endswith(LOG_FILE_SUFFIX)
                       and (b := _offset_of(f)) is not None)
        below = [b for b in bases if b <= self.recovery_point_checkpoint]
        return below[-1] if below else (bases[0] if bases else LONG_MAX)

    def _load_segment_files(self) -> None:
        self._recover_from = self._first_recovered_base()
        for f in self._files():
            name = f.name
            base = _offset_of(f)
            if base is None:
                continue
            if name.endswith(INDEX_SUFFIXES):
                if not log_file(self.dir, base).exists():
                    log.warning("Found an orphaned index file %s, with no log file", f)
                    f.unlink(missing_ok=True)
            elif name.endswith(LOG_FILE_SUFFIX):
                self.segments.add(self._open_segment(base))

    def _open_segment(self, base: int) -> LogSegment:
        time_index_new = not time_index_file(self.dir, base).exists()
        offset_index_missing = not offset_index_file(self.dir, base).exists()
        seg = open_segment(self.dir, base, self.config, self.clock)
        if base >= self._recover_from:
            return seg  # recovered by _recover_log anyway: skip the checks and a double scan
        try:
            if offset_index_missing or (time_index_new and seg.size > 0):
                # Kafka recreates a lone missing .timeindex empty; rebuilding it keeps
                # timestamp lookups right (#74)
                raise FileNotFoundError(offset_index_file(self.dir, base))
            seg.sanity_check(time_index_new)
            seg.sanity_check_indexes()
        except FileNotFoundError:
            log.info("No offset index for %s; recovering the segment", seg)
            self._recover_segment(seg)
        except CorruptIndexError as e:
            log.warning("Corrupt index for %s (%s); recovering the segment", seg, e)
            self._recover_segment(seg)
        return seg

    def _recover_segment(self, segment: LogSegment) -> int:
        """Rebuild the segment's indexes (and txn index) with producer state up to its base."""
        psm = ProducerStateManager(self.dir, topic_partition=self.producer_state.tp,
                                   producer_id_expiration_ms=LONG_MAX)
        rebuild_producer_state(psm, self.segments, self.log_start_offset_checkpoint,
                               segment.base_offset, self.clock,
                               reload_from_clean_shutdown=False)
        truncated = segment.recover(psm, self.epochs)
        psm.take_snapshot()
        return truncated

    def _recover_log(self) -> tuple[int, int]:
        if not self.had_clean_shutdown:
            unflushed = self.segments.values(self.recovery_point_checkpoint, LONG_MAX)
            for i, seg in enumerate(unflushed):
                try:
                    truncated = self._recover_segment(seg)
                except InvalidOffsetError:
                    log.warning("Invalid offset while recovering %s; emptying it", seg)
                    truncated = seg.truncate_to(seg.base_offset)
                if truncated > 0:
                    log.warning("Corruption found in segment %d of %s, truncating to offset %d",
                                seg.base_offset, self.dir, seg.read_next_offset())
                    self._remove_and_delete(unflushed[i + 1:])
                    break
        end = self._delete_segments_if_log_start_greater_than_log_end()
        if self.segments.is_empty():
            self.segments.add(open_segment(
                self.dir, self.log_start_offset_checkpoint, self.config, self.clock,
                preallocate=self.config.preallocate,
            ))
        if self.had_clean_shutdown and end is not None:
            return end, end
        leo = end if end is not None else self.segments.active_segment.read_next_offset()
        return min(self.recovery_point_checkpoint, leo), leo

    def _delete_segments_if_log_start_greater_than_log_end(self) -> int | None:
        last = self.segments.last_segment
        if last is None:
            return None
        leo = last.read_next_offset()
        if leo >= self.log_start_offset_checkpoint:
            return leo
        log.warning("Deleting all segments of %s: log end %d < log start %d", self.dir, leo,
                    self.log_start_offset_checkpoint)
        self._remove_and_delete(self.segments.values())
        self.producer_state.truncate_fully_and_start_at(self.log_start_offset_checkpoint)
        self.epochs.clear_and_flush()
        return None

    def _remove_and_delete(self, segs: Iterable[LogSegment]) -> None:
        for seg in list(segs):
            self.segments.remove(seg.base_offset)
            seg.delete()


# -- producer state ----------------------------------------------------------------------------
def load_producers_from_batches(psm: ProducerStateManager,
                                batches: Iterable[RecordBatch]) -> None:
    for batch in batches:
        if batch.has_producer_id:
            completed = psm.update_from_recovered_batch(batch)
            if completed is not None:
                psm.complete_txn(completed)


def rebuild_producer_state(
    psm: ProducerStateManager,
    segments: LogSegments,
    log_start_offset: int,
    last_offset: int,
    clock: Clock,
    *,
    reload_from_clean_shutdown: bool,
) -> None:
    """Kafka's UnifiedLog.rebuildProducerState: latest snapshot + replay up to last_offset."""
    to_snapshot: list[int] = []
    last = segments.last_segment
    if last is not None:
        lower = segments.lower_segment(last.base_offset)
        if lower is not None:
            to_snapshot.append(lower.base_offset)
        to_snapshot.append(last.base_offset)
    to_snapshot.append(last_offset)
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        # Clean shutdown without snapshots: skip the scan; empty snapshots mark the state.
        for off in to_snapshot:
            psm.update_map_end_offset(off)
            psm.take_snapshot()
        return
    was_empty = psm.is_empty and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, clock.milliseconds())
    if last_offset > psm.map_end_offset and not was_empty:
        _replay_segments(psm, segments, log_start_offset, last_offset, to_snapshot)
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot()
    backfill_recent_batches(psm, segments, log_start_offset, last_offset)


RECENT_WINDOW = 10_000  # offsets before the end searched for producers' earlier batches


def backfill_recent_batches(psm: ProducerStateManager, segments: LogSegments,
                            log_start_offset: int, last_offset: int) -> None:
    """Beyond Kafka: a snapshot keeps one batch per producer, so after a restart or a
    truncation a retry of any of a producer's other in-flight batches (up to five) would not
    be recognised as a duplicate and would be refused OUT_OF_ORDER_SEQUENCE_NUMBER, which an
    idempotent librdkafka producer takes as fatal. For producers whose last batch lies within
    ``RECENT_WINDOW`` offsets of ``last_offset`` in the segment holding it, the batches they
    wrote before it (same epoch, in log order, read back from that segment) are restored, up
    to five in all, as a replay from further back would have left them."""
    seg = segments.floor_segment(last_offset - 1) if last_offset > 0 else None
    if seg is None:
        return
    floor = max(seg.base_offset, log_start_offset, last_offset - RECENT_WINDOW)
    short = {pid: e for pid, e in psm.producers.items()
             if 0 < len(e.batch_metadata) < NUM_BATCHES_TO_RETAIN
             and e.batch_metadata[0].first_offset >= floor}  # fmt: skip
    if not short:
        return
    start = seg.translate_offset(floor)
    end = seg.translate_offset(max(e.batch_metadata[0].first_offset for e in short.values()))
    if start is None or end is None or start.position >= end.position:
        return
    earlier: dict[int, tuple[int, list[BatchMetadata]]] = {}  # pid -> (epoch, batches)
    for batch in seg.log.batches(start.position, end.position):
        if batch.producer_id not in short or batch.last_offset < floor:
            continue
        epoch, found = earlier.get(batch.producer_id, (batch.producer_epoch, []))
        if epoch != batch.producer_epoch:  # a new epoch forgets the older batches
            epoch, found = batch.producer_epoch, []
        if not batch.is_control:
            found.append(BatchMetadata(batch.last_sequence, batch.last_offset,
                                       batch.last_offset - batch.base_offset, batch.max_timestamp))
        earlier[batch.producer_id] = (epoch, found)
    for pid, (epoch, found) in earlier.items():
        psm.restore_earlier_batches(pid, epoch, found)


def _replay_segments(psm: ProducerStateManager, segments: LogSegments, log_start_offset: int,
                     last_offset: int, to_snapshot: list[int]) -> None:
    seg_of_last = segments.floor_segment(last_offset)
    for seg in segments.values(psm.map_end_offset, last_offset):
        start = max(seg.base_offset, psm.map_end_offset, log_start_offset)
        psm.update_map_end_offset(start)
        if seg.base_offset in to_snapshot:
            psm.take_snapshot()
        max_pos = seg.size
        if seg is seg_of_last:
            found = seg.translate_offset(last_offset)
            if found is not None:
                max_pos = found.position
        start_pos = seg.translate_offset(start)
        if start_pos is None or start_pos.position >= max_pos:
            continue
        batches = seg.log.batches(start_pos.position, max_pos)
        load_producers_from_batches(psm, (b for b in batches if b.last_offset >= start))
