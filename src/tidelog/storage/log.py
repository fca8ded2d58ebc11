"""Log: one partition's segments, offsets and producer state (Kafka's UnifiedLog + LocalLog).

Writers (append, roll, truncate, retention) hold the lock; readers do not (see log_read).
Validation lives in validator.py, producer state in producer_state.py, loading in loader.py,
the read side in log_read.py, retention in log_retention.py, the writer threads in
log_writes.py and segment file helpers in log_files.py; the log's own state (offsets,
appends, rolls, flushes, truncation) changes only here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidelog.config.log_config import LogConfig
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition, parse_topic_partition_name

from . import log_read, log_retention, log_tiered_offsets, log_writes
from .errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from .file_records import TimestampAndOffset
from .leader_epoch import EpochEntry, LeaderEpochFileCache
from .loader import LogLoader, open_segment, rebuild_producer_state
from .log_append import (
    AppendBatches,
    LogAppendInfo,
    ProducerAnalysis,
    analyze_producer_state,
    assign_epochs_of,
    duplicate_info,
    settle_producer_state,
)
from .log_files import delete_all, flush_plan, sync
from .log_io import LogIo
from .log_read import FetchIsolation
from .log_writes import (
    AppendWriter,
    PendingWrites,
    WriteDone,
    checkpoint_aside,
    roll_due,
    starts_epoch,
)
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
        # moves (under the lock) whenever what a read at the high watermark answers may have
        # changed: the HW, the log start, the transactions (LSO), truncation, closing. A
        # reader may keep what it computed under the lock while the stamp stays the same.
        self.state_stamp = 0
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
            v, analysis = self._prepare_leader_append(records, leader_epoch, origin)
            if analysis is None:
                return v.info  # a retried batch: its original offsets, nothing written
            return self._write_analyzed(v, analysis, defer_flush)

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
                v, analysis = self._prepare_leader_append(records, leader_epoch, origin)
                handed = analysis is not None and \
                    self._hand_over(v, analysis, writer, done, inline_below)
            info = v.info
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
            v = AppendBatches(buf, a.batches, info)
            analysis = self._analyze(v, AppendOrigin.REPLICATION)
            assert analysis is not None  # (no duplicates but of client appends)
            return self._write_analyzed(v, analysis)

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, log_start_offset=self._log_start_offset)

    def _prepare_leader_append(self, records: bytes | bytearray | memoryview,
                               leader_epoch: int, origin: AppendOrigin
                               ) -> tuple[AppendBatches, ProducerAnalysis | None]:
        """Under the lock, for the sync and the async append alike: validate and assign
        offsets from ``next_offset``, then ``_analyze``."""
        self._check_open()
        res = validate_and_assign_offsets(
            records, self._config, now_ms=self.clock.milliseconds(), offset=self.next_offset,
            leader_epoch=leader_epoch, origin=origin, topic_partition=self._name)
        info = LogAppendInfo(
            res.first_offset, res.last_offset, res.max_timestamp, res.offset_of_max_timestamp,
            res.log_append_time, self._log_start_offset, res.num_messages,
            res.batch.size_in_bytes)
        v = AppendBatches(res.records, [res.batch], info)
        return v, self._analyze(v, origin)

    def _analyze(self, v: AppendBatches, origin: AppendOrigin) -> ProducerAnalysis | None:
        """The size check and the producer state analysis (Kafka's
        analyzeAndValidateProducerState); None for a client's retry of a recent batch, whose
        ``v.info`` then answers with the original offsets."""
        size = len(v.records)
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.name}, "
                f"which exceeds the maximum configured segment size of "
                f"{self._config.segment_bytes}.")
        analysis = analyze_producer_state(self._producer_state, v.batches, origin)
        if analysis.duplicate is None:
            return analysis
        duplicate_info(v.info, analysis.duplicate, log_append_time=self._config.log_append_time,
                       log_start_offset=self._log_start_offset)
        return None

    def _hand_over(self, v: AppendBatches, analysis: ProducerAnalysis, writer: AppendWriter,
                   done: WriteDone, inline_below: int) -> bool:
        """Settle the producer state and hand the write to ``writer`` (log_writes); False
        when written here instead, after the writes in flight: under ``inline_below`` bytes
        with none in flight, or an append that rolls or completes a transaction."""
        info = v.info
        size = len(v.records)
        pending = self._writes
        new_epoch = starts_epoch(self.leader_epoch_cache.latest_epoch(), v.batches)
        if (pending.count == 0 and size < inline_below and not new_epoch) or \
                analysis.completed or roll_due(self._segments.active_segment, pending,
                                               self._config, size, info,
                                               self.clock.milliseconds()):
            pending.drain()
            self._check_open()
            self._write_analyzed(v, analysis, True, assign_epochs=new_epoch)
            return False
        seg = self._segments.active_segment
        # a new leader epoch: in the cache now, its checkpoint (fsynced) written aside before
        # the write is queued, as Kafka's assign flushes it within the append
        epochs = new_epoch and assign_epochs_of(self.leader_epoch_cache, v.batches, flush=False)
        pending.add(info.last_offset + 1, size)
        try:
            if epochs and checkpoint_aside(pending, writer, self.leader_epoch_cache.flush,
                                           self._storage_error):
                epochs = False
            pending.submit(writer, lambda: self._write_handed(seg, info, v.records, done,
                                                              epochs))
        except BaseException:
            pending.finish(size, None)
            raise
        settle_producer_state(self._producer_state, analysis, info)
        self.state_stamp += 1
        return True

    def _write_handed(self, seg: LogSegment, info: LogAppendInfo,
                      records: bytes | bytearray | memoryview, done: WriteDone,
                      flush_epochs: bool) -> None:
        """On the writer's thread: write, then move the log end offset past it (and write the
        leader epoch checkpoint when the append started an epoch), then ``done``."""
        pending = self._writes
        error: BaseException | None = pending.error
        try:
            if error is None and self._closed:
                error = KafkaStorageError(f"The log for {self.name} is closed")
            if error is None:
                seg.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                           records)
                self._end = LogOffsetMetadata(info.last_offset + 1, seg.base_offset, seg.size)
                if flush_epochs:
                    self.leader_epoch_cache.flush()
        except Exception as e:  # a disk error, or a segment refusing the write: broken log
            error = self._storage_error(e)
        pending.finish(len(records), error)
        done(error)

    def _storage_error(self, e: Exception) -> BaseException:
        if isinstance(e, StorageError):
            return e
        error = KafkaStorageError(f"Error while append in dir {self._dir} ({self.name}): {e}")
        error.__cause__ = e  # the OSError behind it: the log dir failure channel's cue
        return error

    def _write_analyzed(self, v: AppendBatches, analysis: ProducerAnalysis,
                        defer_flush: bool = False, *, assign_epochs: bool = True
                        ) -> LogAppendInfo:
        """``assign_epochs=False``: the caller knows no batch starts a newer leader epoch."""
        info = v.info
        segment = self._maybe_roll(len(v.records), info)
        segment.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                       v.records)
        self._end = LogOffsetMetadata(info.last_offset + 1, segment.base_offset, segment.size)
        settle_producer_state(self._producer_state, analysis, info, segment)
        self.state_stamp += 1
        if assign_epochs:
            assign_epochs_of(self.leader_epoch_cache, v.batches)
        if not defer_flush and \
                self.log_end_offset - self._recovery_point >= self._config.flush_messages:
            self.flush()
        return info

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
            plan = flush_plan(self._segments, self.log_end_offset, self._recovery_point, offset)
            if plan is not None:
                sync(plan[1], self._dir if plan[2] else None)
                self._mark_flushed(plan[0])

    def flush_outside_lock(self, offset: int) -> None:
        """``flush`` with the fsyncs outside the log's lock, as Kafka's UnifiedLog.flush (the
        lock only lists the segments and marks the recovery point): the broker's group commit
        flushes on a worker thread while appends go on. Raises KafkaStorageError on a failed
        fsync, or if the log was closed meanwhile (its records are then not known to be on
        disk: never acknowledge them)."""
        with self._io("flush"):
            self._check_open()
            plan = flush_plan(self._segments, self.log_end_offset, self._recovery_point, offset)
        if plan is None:
            return
        try:
            sync(plan[1], self._dir if plan[2] else None)
        except (OSError, StorageError) as e:
            with self._lock:
                closed = self._closed
            if closed:  # closed under us (deleted, dir offline): not a disk error of its own
                raise KafkaStorageError(f"The log for {self.name} was closed during its "
                                        "flush") from None
            raise KafkaStorageError(
                f"Error while flush in dir {self._dir} ({self.name}): {e}") from e
        with self._lock:
            self._check_open()
            self._mark_flushed(plan[0])

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
        self.state_stamp += 1
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
            self.state_stamp += 1
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
        """Follower truncation (Kafka's UnifiedLog.truncateTo, #83-#86): cut the log back to
        ``target``, producer state, leader epochs and the transaction index following; False
        if target >= LEO."""
        if target < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset")
        with self._io("truncate"):
            self._check_open()
            if target >= self.log_end_offset:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            if (self._segments.first_segment_base_offset or 0) > target:
                self.truncate_fully_and_start_at(target)
                return True
            self.remove_and_delete_segments(self._segments.higher_segments(target),
                                            "truncation")
            active = self._segments.active_segment
            active.truncate_to(target)
            self._end = LogOffsetMetadata(target, active.base_offset, active.size)
            self._log_start_offset = min(self._log_start_offset, target)
            self._recovery_point = min(self._recovery_point, target)
            self._set_hw(min(self._hw, target))
            rebuild_producer_state(self._producer_state, self._segments,
                                   self._log_start_offset, target, self.clock,
                                   reload_from_clean_shutdown=False)
            self.leader_epoch_cache.truncate_from_end(target)
            self.state_stamp += 1
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (#85)."""
        with self._io("truncate"):
            self._check_open()
            old = self._segments.values()
            for seg in old:
                self._segments.remove(seg.base_offset)
            self._producer_state.truncate_fully_and_start_at(offset)
            self.leader_epoch_cache.clear_and_flush()
            for seg in old:
                seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            self._segments.add(open_segment(self._dir, offset, self._config, self.clock,
                                            preallocate=self._config.preallocate))
            self._end = LogOffsetMetadata(offset, offset, 0)
            self._log_start_offset = self._recovery_point = offset
            self._set_hw(offset)
            self._schedule("delete-file", lambda: delete_all(old),
                           self._config.file_delete_delay_ms)

    def restore_remote_state(self, next_offset: int, log_start_offset: int,
                             epochs: list[EpochEntry], producer_snapshot: bytes) -> None:
        """A tiered follower's log rebuilt from remote storage (Kafka's
        buildRemoteLogAuxState): empty at ``next_offset`` (the end of the leader's last remote
        segment before its local start + 1), the leader's log start below it, the leader-epoch
        cache and the producer state from that segment's checkpoint and snapshot."""
        self.truncate_fully_and_start_at(next_offset)
        with self._io("restore from remote storage"):
            self._log_start_offset = min(log_start_offset, next_offset)
            for e in epochs:
                if e.start_offset < next_offset:
                    self.leader_epoch_cache.assign(e.epoch, e.start_offset, flush=False)
            self.leader_epoch_cache.flush()
            self._producer_state.reload_from_snapshot(producer_snapshot, next_offset,
                                                      self._log_start_offset,
                                                      self.clock.milliseconds())
            self.state_stamp += 1

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
            self.state_stamp += 1
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
            self.state_stamp += 1

    def close_handlers(self) -> None:
        """Close file descriptors without flushing (a simulated crash / offline dir)."""
        with self._lock:
            self._writes.drain()
            self._segments.close_handlers()
            self._closed = True
            self.state_stamp += 1

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
            self.state_stamp += 1

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
            self._producer_state.rescan_snapshots()

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

