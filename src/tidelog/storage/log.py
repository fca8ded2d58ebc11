"""Log: one partition's segments, offsets and producer state (Kafka's UnifiedLog + LocalLog).

Writers (append, roll, truncate, retention) hold the lock; readers do not (see log_read).
Validation lives in validator.py, producer state in producer_state.py, loading in loader.py,
the read side in log_read.py and retention in log_retention.py, truncation in log_truncation.py, segment file helpers
in log_files.py, so this module is the glue.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatch
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition, parse_topic_partition_name

from . import log_flush, log_read, log_retention, log_tiered_offsets, log_truncation, log_writes
from .errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from .file_records import TimestampAndOffset
from .index.txn_index import AbortedTxn
from .leader_epoch import LeaderEpochFileCache
from .loader import LogLoader, open_segment
from .log_append import (
    AppendBatches,
    LogAppendInfo,
    ProducerAnalysis,
    analyze_producer_state,
    duplicate_info,
)
from .log_files import delete_all, sync
from .log_io import LogIo
from .log_read import FetchIsolation
from .log_writes import AppendWriter, PendingWrites, WriteDone
from .producer_state import ProducerStateManager
from .segment import DELETED_FILE_SUFFIX, FetchDataInfo, LogOffsetMetadata, LogSegment, log_file
from .segments import LogSegments
from .validator import AppendOrigin, analyze_follower_records, validate_and_assign_offsets

log = logging.getLogger(__name__)

__all__ = ["AppendOrigin", "FetchIsolation", "Log", "LogAppendInfo"]

INT32_MAX = 2**31 - 1


class Log:
    def __init__(self, dir: Path, config: LogConfig, clock: Clock, scheduler: Any,
                 segments: LogSegments, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochFileCache, *,
                 log_start_offset: int, recovery_point: int,
                 next_offset_metadata: LogOffsetMetadata) -> None:
        self._dir = Path(dir)
        self._config = config
        self.clock = clock
        self.scheduler = scheduler
        self._segments = segments
        self._producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._end = next_offset_metadata
        self._hw = log_start_offset
        self._hw_meta: LogOffsetMetadata | None = None  # HW with its position, when known
        self._lock = threading.RLock()
        self.last_flush_time = clock.milliseconds()
        self.pending_deletes: list[LogSegment] = []
        # (size, by a coordinator) -> None or LogDirBelowFloorError: the LogManager's
        # free-space floor of this log's dir (free_space.py); None: no floor
        self.append_guard: Callable[[int, bool], None] | None = None
        # () -> the lowest offset a reader outside the log still needs (an Iceberg topic's
        # next offset to commit to its table); retention by size and time keeps every segment
        # that holds it or later offsets. None: no such reader
        self.retention_floor: Callable[[], int | None] | None = None
        self._closed = False
        # tiered storage: the last offset copied to remote storage (Kafka's
        # highestOffsetInRemoteStorage), moved by the RemoteLogManager; -1: none yet
        self.highest_offset_in_remote_storage = -1
        self._writes = PendingWrites()  # appends handed to the dir's writer (log_writes)
        try:
            self._tp: TopicPartition | None = parse_topic_partition_name(self._dir.name)
        except ValueError:
            self._tp = None
        self._name = str(self._tp) if self._tp is not None else self._dir.name

    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, clock: Clock, scheduler: Any = None,
             log_start_offset: int = 0, recovery_point: int = 0,
             had_clean_shutdown: bool = False,
             producer_id_expiration_ms: int = 86_400_000) -> Log:
        d = Path(dir)
        d.mkdir(parents=True, exist_ok=True)
        psm = ProducerStateManager(d, producer_id_expiration_ms=producer_id_expiration_ms)
        segments = LogSegments()
        epochs = LeaderEpochFileCache(d)
        loaded = LogLoader(d, config, clock, segments,
                           log_start_offset_checkpoint=log_start_offset,
                           recovery_point_checkpoint=recovery_point,
                           had_clean_shutdown=had_clean_shutdown,
                           producer_state=psm, leader_epoch_cache=epochs).load()
        return cls(d, config, clock, scheduler, segments, psm, epochs,
                   log_start_offset=loaded.log_start_offset,
                   recovery_point=loaded.recovery_point,
                   next_offset_metadata=loaded.next_offset_metadata)

    # -- properties ----------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def lock(self) -> threading.RLock:
        """The writer lock (appends, rolls, truncation, retention, segment swaps)."""
        return self._lock

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def topic_partition(self) -> TopicPartition | None:
        return self._tp

    @property
    def name(self) -> str:
        return self._name

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._end.message_offset

    @property
    def remote_log_enabled(self) -> bool:
        """Tiered (``remote.storage.enable``; the broker refuses it unless its tiered
        storage is on): local retention waits for copies, the log start is the remote one."""
        return self._config.remote_storage_enable

    @property
    def local_log_start_offset(self) -> int:
        """Kafka's localLogStartOffset: the first offset on local disk."""
        first = self._segments.first_segment_base_offset
        return self._log_start_offset if first is None else max(first, self._log_start_offset)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def next_offset(self) -> int:
        """Where the next append's offsets start: the LEO, or past the writes in flight."""
        w = self._writes
        return w.next_offset if w.count else self._end.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._end

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self._producer_state.first_unstable_offset()
        return self._hw if first_unstable is None else min(first_unstable, self._hw)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active_segment

    def number_of_segments(self) -> int:
        return len(self._segments)

    # -- append --------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int = 0,
                         origin: AppendOrigin = AppendOrigin.CLIENT, *,
                         defer_flush: bool = False) -> LogAppendInfo:
        """Validate, assign offsets from the LEO, dedup idempotent retries, append.

        ``defer_flush``: leave the ``flush.messages`` fsync to the caller (the broker's group
        commit flushes once per log per event-loop turn)."""
        if len(records) == 0:
            return self._empty_append_info()
        if self.append_guard is not None:
            self.append_guard(len(records), origin is AppendOrigin.COORDINATOR)
        with self._io("append"):
            self._check_open()
            now = self.clock.milliseconds()
            res = validate_and_assign_offsets(
                records, self._config, now_ms=now, offset=self.log_end_offset,
                leader_epoch=leader_epoch, origin=origin, topic_partition=self.name)
            info = LogAppendInfo(
                res.first_offset, res.last_offset, res.max_timestamp,
                res.offset_of_max_timestamp, res.log_append_time, self._log_start_offset,
                res.num_messages, res.batch.size_in_bytes)
            return self._append(AppendBatches(res.records, [res.batch], info), origin,
                                defer_flush)

    def append_as_leader_async(self, records: bytes | bytearray | memoryview,
                               leader_epoch: int, writer: AppendWriter, done: WriteDone,
                               origin: AppendOrigin = AppendOrigin.CLIENT, *,
                               inline_below: int = log_writes.INLINE_WRITE_BYTES
                               ) -> tuple[LogAppendInfo, bool]:
        """``append_as_leader`` whose segment write may run on ``writer`` (log_writes):
        offsets and producer state are settled here, the log end offset moves once the bytes
        are written. Returns the answer and whether ``done`` will run (on the writer's thread,
        after the writes before it): False when the append is complete on return (written
        here, or a duplicate or empty with no write in flight). The ``flush.messages`` fsync
        is the caller's (the broker's group commit). Raises as ``append_as_leader``."""
        if len(records) == 0:
            info = self._empty_append_info()
        else:
            if self.append_guard is not None:
                self.append_guard(len(records), origin is AppendOrigin.COORDINATOR)
            with self._io("append-async"):
                info, handed = log_writes.hand_over(self, records, leader_epoch, origin,
                                                    writer, done, inline_below)
            if handed:
                return info, True
        w = self._writes
        if w.count == 0:
            w.check(self.name)  # a duplicate of a write that failed is not acknowledged
            return info, False
        w.submit(writer, lambda: done(w.error))  # answered after the writes in flight
        return info, True

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append replicated batches keeping their offsets (must not go below the LEO)."""
        if len(records) == 0:
            return self._empty_append_info()
        with self._io("append"):
            self._check_open()
            a = analyze_follower_records(records, path=self.name)
            if a.first_offset < self.log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.name}. First offset "
                    f"{a.first_offset} is less than the next offset {self.log_end_offset}.",
                    a.first_offset, a.last_offset)
            info = LogAppendInfo(a.first_offset, a.last_offset, a.max_timestamp,
                                 a.offset_of_max_timestamp, -1, self._log_start_offset,
                                 a.num_messages, a.valid_bytes)
            if a.last_offset - a.first_offset > INT32_MAX and len(a.batches) > 1:
                # offsets too far apart for one segment: append batch by batch (each may roll)
                for b in a.batches:
                    self.append_as_follower(bytes(b.buf))
                info.log_start_offset = self._log_start_offset
                return info
            buf = bytes(records) if not isinstance(records, bytes | bytearray) else records
            return self._append(AppendBatches(buf, a.batches, info), AppendOrigin.REPLICATION)

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, log_start_offset=self._log_start_offset)

    def _check_size(self, size: int) -> None:
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.name}, "
                f"which exceeds the maximum configured segment size of "
                f"{self._config.segment_bytes}.")

    def _append(self, v: AppendBatches, origin: AppendOrigin,
                defer_flush: bool = False) -> LogAppendInfo:
        self._check_size(len(v.records))
        analysis = analyze_producer_state(self._producer_state, v.batches, origin)
        if analysis.duplicate is not None:
            return duplicate_info(v.info, analysis.duplicate,
                                  log_append_time=self._config.log_append_time,
                                  log_start_offset=self._log_start_offset)
        return self._write_analyzed(v, analysis, defer_flush)

    def _write_analyzed(self, v: AppendBatches, analysis: ProducerAnalysis,
                        defer_flush: bool, *, assign_epochs: bool = True) -> LogAppendInfo:
        """``assign_epochs=False``: the caller knows no batch starts a newer leader epoch."""
        info = v.info
        segment = self._maybe_roll(len(v.records), info)
        segment.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                       v.records)
        self._end = LogOffsetMetadata(info.last_offset + 1, segment.base_offset, segment.size)
        self._settle_producer_state(analysis, info, v.batches, segment,
                                    assign_epochs=assign_epochs)
        if not defer_flush and \
                self.log_end_offset - self._recovery_point >= self._config.flush_messages:
            self.flush()
        return info

    def _settle_producer_state(self, analysis: ProducerAnalysis, info: LogAppendInfo,
                               batches: list[RecordBatch],
                               segment: LogSegment | None = None, *,
                               assign_epochs: bool = True) -> None:
        psm = self._producer_state
        for upd in analysis.updates.values():
            psm.update(upd)
        for c in analysis.completed:
            lso = psm.last_stable_offset(c)
            if c.is_aborted and segment is not None:
                segment.update_txn_index(AbortedTxn(c.producer_id, c.first_offset,
                                                    c.last_offset, lso))
            psm.complete_txn(c)
        psm.update_map_end_offset(info.last_offset + 1)
        if assign_epochs:
            self._maybe_assign_epochs(batches)

    def _maybe_assign_epochs(self, batches: list[RecordBatch], flush: bool = True) -> bool:
        """A batch of a newer leader epoch starts it in the cache; True if one did."""
        cache = self.leader_epoch_cache
        assigned = False
        for b in batches:
            epoch = b.partition_leader_epoch
            latest = cache.latest_epoch()
            if epoch >= 0 and (latest is None or epoch > latest):
                assigned |= cache.assign(epoch, b.base_offset, flush=flush)
        return assigned

    # -- roll ----------------------------------------------------------------------------------
    def _maybe_roll(self, size: int, info: LogAppendInfo) -> LogSegment:
        seg = self._segments.active_segment
        if seg.should_roll(max_segment_ms=self._config.max_segment_ms,
                           max_segment_bytes=self._config.segment_bytes,
                           max_timestamp_in_messages=info.max_timestamp,
                           max_offset_in_messages=info.last_offset,
                           messages_size=size, now=self.clock.milliseconds()):
            return self.roll(info.first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, LEO); snapshot producer state there."""
        with self._io("roll"):
            self._check_open()
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self._segments.active_segment
            if new_offset == active.base_offset and active.size == 0:
                return active  # rolling an empty segment onto itself: nothing to do
            if new_offset <= active.base_offset:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self.name} with start offset "
                    f"{new_offset} <= the active segment's base {active.base_offset}")
            stale = log_file(self._dir, new_offset)
            if stale.exists():
                log.warning("Deleting stale segment files at %d in %s", new_offset, self._dir)
                open_segment(self._dir, new_offset, self._config, self.clock).delete()
            active.on_becoming_inactive()
            seg = open_segment(self._dir, new_offset, self._config, self.clock,
                                  preallocate=self._config.preallocate)
            self._segments.add(seg)
            self._end = LogOffsetMetadata(self.log_end_offset, seg.base_offset, seg.size)
            self._producer_state.update_map_end_offset(new_offset)
            self._producer_state.take_snapshot()
            self._schedule("flush-log", lambda: self.flush(new_offset), 0)
            return seg

    # -- flush and recovery point --------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding [recovery point, offset) and advance the recovery point."""
        with self._io("flush"):
            if self._closed:
                return
            plan = log_flush.flush_plan(self, offset)
            if plan is not None:
                sync(plan[1], self._dir if plan[2] else None)
                self._mark_flushed(plan[0])

    def flush_outside_lock(self, offset: int) -> None:
        """``flush`` with the fsyncs outside the log's lock (log_flush.py): for the broker's
        group commit, on a worker thread."""
        log_flush.flush_outside_lock(self, offset)

    def _mark_flushed(self, target: int) -> None:
        if target > self._recovery_point:  # a concurrent flush may have gone further
            self._recovery_point = min(target, self.log_end_offset)
            self.last_flush_time = self.clock.milliseconds()

    # -- high watermark ------------------------------------------------------------------------
    def update_high_watermark(self, hw: int) -> int:
        """Set the HW clamped to [log start, LEO]; returns the value set (#87)."""
        with self._lock:
            self._set_hw(min(max(hw, self._log_start_offset), self.log_end_offset))
            return self._hw

    def maybe_increment_high_watermark(self, hw: int) -> int | None:
        """Move the HW forward only; above the LEO is an error. Returns the old HW if moved."""
        with self._lock:
            if hw > self.log_end_offset:
                raise ValueError(f"High watermark {hw} update exceeds current log end offset "
                                 f"{self.log_end_offset} of {self.name}")
            if hw <= self._hw:
                return None
            old = self._hw
            self._set_hw(hw)
            return old

    def _set_hw(self, hw: int) -> None:
        self._hw = hw
        end = self._end
        self._hw_meta = end if hw == end.message_offset else None
        self._producer_state.on_high_watermark_updated(hw)

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "") -> bool:
        """DeleteRecords / retention: raise the log start offset (never above the HW, #81)."""
        with self._lock:
            if offset > self._hw:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {offset} of partition "
                    f"{self.name} since it is larger than the high watermark {self._hw}")
            if offset <= self._log_start_offset:
                return False
            log.info("Incremented log start offset of %s to %d (%s)", self.name, offset, reason)
            self._log_start_offset = offset
            self._recovery_point = max(self._recovery_point, offset)
            self._producer_state.on_log_start_offset_incremented(offset)
            self.leader_epoch_cache.truncate_from_start(offset)
            return True

    # -- reads ---------------------------------------------------------------------------------
    def read(self, start_offset: int, max_length: int,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchDataInfo:
        end = self._end
        hw_meta = self._hw_meta
        if isolation is FetchIsolation.LOG_END:
            bound = end
        elif isolation is FetchIsolation.HIGH_WATERMARK and hw_meta is not None:
            bound = hw_meta  # the common case: a single node moves the HW to the LEO
        else:
            off = self._hw if isolation is FetchIsolation.HIGH_WATERMARK \
                else self.last_stable_offset
            bound = log_read.offset_metadata(self._segments, off, end)
        bounds = log_read.ReadBounds(self._log_start_offset, end, bound)
        return log_read.read(self._segments, bounds, start_offset, max_length,
                             min_one_message=min_one_message,
                             include_aborted=isolation is FetchIsolation.TXN_COMMITTED,
                             path=self._tp or self._dir.name)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        tiered = log_tiered_offsets.tiered_offset(self, timestamp)
        if tiered is not None:
            return tiered
        return log_read.fetch_offset_by_timestamp(
            self._segments, timestamp, log_start_offset=self._log_start_offset,
            log_end_offset=self.log_end_offset, epochs=self.leader_epoch_cache)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, the end offset of it)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # -- retention -----------------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Retention by log start offset, then size, then time (#75-#80)."""
        with self._io("retention"):
            self._check_open()
            return log_retention.delete_old_segments(self)

    def remove_and_delete_segments(self, segs: list[LogSegment], reason: str) -> None:
        """Drop from lookups, rename to .deleted now, remove after file.delete.delay.ms."""
        for seg in segs:
            self._segments.remove(seg.base_offset)
        for seg in segs:
            log.info("Deleting segment %s of %s due to %s", seg.base_offset, self.name, reason)
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        if self.scheduler is not None:
            self._schedule("delete-file", lambda: delete_all(segs),
                           self._config.file_delete_delay_ms)
        else:
            self.pending_deletes.extend(segs)
            self.delete_pending_files()

    def delete_pending_files(self) -> None:
        pending, self.pending_deletes = self.pending_deletes, []
        delete_all(pending)

    # -- truncation ----------------------------------------------------------------------------
    def truncate_to(self, target: int) -> bool:
        """Follower truncation (#83-#86); False if target >= LEO."""
        return log_truncation.truncate_to(self, target)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (#85)."""
        log_truncation.truncate_fully_and_start_at(self, offset)

    # -- producers -----------------------------------------------------------------------------
    def wait_for_writes(self) -> None:
        """Return once every append handed to the writer is written: a leader becoming a
        follower starts fetching at a log end offset that no queued old-epoch write moves
        afterwards (Kafka's makeFollower holds the partition's write lock)."""
        with self._lock:
            self._writes.drain()

    def take_producer_snapshot(self) -> None:
        with self._lock:
            self._writes.drain()
            self._producer_state.take_snapshot()

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        with self._lock:
            return self._producer_state.remove_expired_producers(now_ms)

    # -- lifecycle -----------------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        self._config = config

    def close(self) -> None:
        """Snapshot producer state at the LEO (#103), then flush, trim and close segments."""
        with self._io("close"):
            if self._closed:
                return
            self._producer_state.update_map_end_offset(self.log_end_offset)
            self._producer_state.take_snapshot()
            self._segments.close()
            self.delete_pending_files()
            self._closed = True

    def close_handlers(self) -> None:
        """Close file descriptors without flushing (a simulated crash / offline dir)."""
        with self._lock:
            self._writes.drain()
            self._segments.close_handlers()
            self._closed = True

    def delete(self) -> None:
        """Delete every file of this log and its directory."""
        with self._lock:
            self._writes.drain()
            for seg in self._segments.values():
                seg.delete()
            self._segments.clear()
            self._producer_state.truncate_fully_and_start_at(0)
            delete_all(self.pending_deletes)
            self.pending_deletes = []
            for p in self._dir.iterdir() if self._dir.exists() else []:
                if p.is_file():
                    p.unlink(missing_ok=True)
            if self._dir.exists():
                self._dir.rmdir()
            self._closed = True

    def rename_dir(self, name: str) -> None:
        with self._lock:
            self._writes.drain()
            new_dir = self._dir.parent / name
            os.rename(self._dir, new_dir)
            self._dir = new_dir
            if self._tp is None:
                self._name = new_dir.name
            self._segments.update_parent_dir(new_dir)
            self._producer_state.dir = new_dir
            self.leader_epoch_cache.update_dir(new_dir)
            self._producer_state.snapshots = self._producer_state._scan_snapshots()

    def _io(self, op: str) -> LogIo:
        """Hold the lock; an OSError becomes KafkaStorageError naming the log dir (Kafka)."""
        return LogIo(self._lock, self._writes, op, self)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"The log for {self.name} is closed")
        self._writes.check(self.name)

    def _schedule(self, name: str, fn: Any, delay_ms: int) -> None:
        if self.scheduler is None:
            fn()
        else:
            self.scheduler.schedule(name, fn, delay_ms)

    def __repr__(self) -> str:
        return (f"Log({self._dir}, start={self._log_start_offset}, end={self.log_end_offset}, "
                f"hw={self._hw}, segments={len(self._segments)})")

