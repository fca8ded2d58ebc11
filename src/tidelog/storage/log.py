"""Log: one partition's log, the class callers use (Kafka's UnifiedLog).

The Log owns what is not a file on the local disk: the log start offset, the high
watermark, the producer state, the leader epochs, the appends (validation, offsets,
deduplication, the hand-over to the dir's writer) and the tiered-storage offsets; its
``LocalLog`` (local_log.py) owns the dir, the segments, the recovery point, the log end
offset, rolls, flushes, truncation and the deletion of segment files.

Writers (append, roll, truncate, retention) hold the lock; readers do not (see log_read).
Validation lives in validator.py, producer state in producer_state.py, loading in loader.py,
the read side in log_read.py, retention in log_retention.py, truncation in
log_truncation.py, the writer threads in log_writes.py, the accessors the LocalLog alone
answers in log_view.py; the log's own state changes only here, in log_truncation.py and in
LocalLog.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler

from . import log_read, log_retention, log_tiered_offsets, log_writes
from .errors import OffsetOutOfRangeError, UnexpectedAppendOffsetError
from .file_records import TimestampAndOffset
from .free_space import DirSpace
from .leader_epoch import LeaderEpochFileCache
from .loader import LogLoader
from .local_log import LocalLog
from .log_append import (
    AppendBatches,
    LogAppendInfo,
    ProducerAnalysis,
    analyze_append,
    assign_epochs_of,
    follower_info,
    leader_batches,
    settle_producer_state,
)
from .log_io import LogIo
from .log_plain import append_plain
from .log_read import FetchIsolation
from .log_truncation import LogTruncation
from .log_view import LocalLogView
from .log_writes import (
    AppendWriter,
    WriteDone,
    checkpoint_aside,
    roll_due,
    starts_epoch,
)
from .producer_state import ProducerStateManager
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments
from .validator import AppendOrigin, analyze_follower_records

log = logging.getLogger(__name__)

__all__ = ["AppendOrigin", "FetchIsolation", "LocalLog", "Log", "LogAppendInfo"]

INT32_MAX = 2**31 - 1
_COORDINATOR = AppendOrigin.COORDINATOR  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER
_CLIENT = AppendOrigin.CLIENT


class Log(LocalLogView, LogTruncation):
    """One partition's log over its ``LocalLog``: opened by ``Log.open`` (the LogLoader's
    recovery first)."""

    def __init__(self, local: LocalLog, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochFileCache, *, log_start_offset: int) -> None:
        super().__init__(local)
        # LocalLog's config as a plain attribute (read per append); update_config sets it
        self.config = local.config
        self._producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self._log_start_offset = log_start_offset
        self.high_watermark = log_start_offset  # (a plain attribute: read per append)
        self._hw_meta: LogOffsetMetadata | None = None  # HW with its position, when known
        # moves (under the lock) whenever what a read at the high watermark answers may have
        # changed: the HW, the log start, the transactions (LSO), truncation, closing. A
        # reader may keep what it computed under the lock while the stamp stays the same.
        self.state_stamp = 0
        self._lock = threading.RLock()
        self._ios: dict[str, LogIo] = {}  # _io's
        # (size, by a coordinator) -> None or LogDirBelowFloorError: the LogManager's free-space
        # floor of this log's dir (free_space.py), None: none; and that dir's ``DirSpace``
        self.append_guard: Callable[[int, bool], None] | None = None
        self.append_space: DirSpace | None = None
        # () -> the lowest offset a reader outside the log still needs (an Iceberg topic's
        # next offset to commit to its table); retention by size and time keeps every segment
        # that holds it or later offsets. None: no such reader
        self.retention_floor: Callable[[], int | None] | None = None
        # tiered storage: the last offset copied to remote storage (Kafka's
        # highestOffsetInRemoteStorage), moved by the RemoteLogManager; -1: none yet
        self.highest_offset_in_remote_storage = -1
        self._name = local.name

    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, clock: Clock,
             scheduler: Scheduler | None = None,
             log_start_offset: int = 0, recovery_point: int = 0,
             had_clean_shutdown: bool = False,
             producer_id_expiration_ms: int = 86_400_000) -> Log:
        d = Path(dir)
        d.mkdir(parents=True, exist_ok=True)
        psm = ProducerStateManager(d, producer_id_expiration_ms=producer_id_expiration_ms)
        segments = LogSegments()
        epochs = LeaderEpochFileCache(d, scheduler)
        loaded = LogLoader(d, config, clock, segments,
                           log_start_offset_checkpoint=log_start_offset,
                           recovery_point_checkpoint=recovery_point,
                           had_clean_shutdown=had_clean_shutdown,
                           producer_state=psm, leader_epoch_cache=epochs).load()
        local = LocalLog(d, config, segments, loaded.recovery_point,
                         loaded.next_offset_metadata, scheduler, clock)
        return cls(local, psm, epochs, log_start_offset=loaded.log_start_offset)

    # -- properties (those of the LocalLog alone: log_view.LocalLogView) ---------------------
    @property
    def lock(self) -> threading.RLock:
        """The writer lock (appends, rolls, truncation, retention, segment swaps)."""
        return self._lock

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def name(self) -> str:
        return self._name

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """Kafka's localLogStartOffset: the first offset on local disk."""
        first = self._local.segments.first_segment_base_offset
        return self._log_start_offset if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self._producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None else min(first_unstable, hw)

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
            plain = self._append_plain(records, leader_epoch, origin, INT32_MAX)
            if plain is not None:
                if not defer_flush and self.log_end_offset - self._local.recovery_point >= \
                        self._local.config.flush_messages:
                    self.flush()
                return plain
            v, analysis = self._prepare_leader_append(records, leader_epoch, origin)
            if analysis is None:
                return v.info  # a retried batch: its original offsets, nothing written
            return self._write_analyzed(v, analysis, defer_flush)

    def append_as_leader_async(self, records: bytes | bytearray | memoryview,
                               leader_epoch: int, writer: AppendWriter, done: WriteDone,
                               origin: AppendOrigin = AppendOrigin.CLIENT, *,
                               inline_below: int = log_writes.INLINE_WRITE_BYTES,
                               plain_declined: bool = False) -> tuple[LogAppendInfo, bool]:
        """``append_as_leader`` whose segment write may run on ``writer`` (log_writes):
        offsets and producer state are settled here, the log end offset moves once the bytes
        are written. Returns the answer and whether ``done`` will run (on the writer's thread,
        after the writes before it): False when the append is complete on return (written
        here, or a duplicate or empty with no write in flight). The ``flush.messages`` fsync
        is the caller's (the broker's group commit). Raises as ``append_as_leader``.
        ``plain_declined``: ``append_plain_as_leader`` declined it (its free space counted).
        """
        if len(records) == 0:
            info = self._empty_append_info()
        else:
            if origin is _CLIENT and not plain_declined:
                plain = self.append_plain_as_leader(records, leader_epoch, inline_below)
                if plain is not None:
                    return plain, False
            elif self.append_guard is not None and not plain_declined:
                self.append_guard(len(records), origin is _COORDINATOR)
            with self._io("append-async"):
                v, analysis = self._prepare_leader_append(records, leader_epoch, origin)
                handed = analysis is not None and \
                    self._hand_over(v, analysis, writer, done, inline_below)
            info = v.info
            if handed:
                return info, True
        w = self._local.writes
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
            info = follower_info(a, self._log_start_offset)
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

    def _append_plain(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                      origin: AppendOrigin, inline_below: int) -> LogAppendInfo | None:
        """Under the lock: a client's append written by ``log_plain`` (the common case in one
        native call), or None: the reference path's to make."""
        if origin is not _CLIENT:
            return None
        self._check_open()
        info = append_plain(self._local, self._producer_state, self.leader_epoch_cache,
                            records, leader_epoch, inline_below, self._log_start_offset)
        if info is not None:
            self.state_stamp += 1
        return info

    def append_plain_as_leader(self, records: bytes | bytearray | memoryview,
                               leader_epoch: int, inline_below: int,
                               to_end: bool = False) -> LogAppendInfo | None:
        """A client's append written here and now by ``log_plain`` (no writer, no callback),
        complete on return as ``append_as_leader_async`` answering False; or None: nothing
        done but the free-space count (then ``append_as_leader_async(..., plain_declined=True)``).
        Raises as ``append_as_leader``. ``to_end`` (the ISR this leader alone): unless a flush
        is due, the HW moves to the new log end in the same lock hold (``_io`` inline)."""
        n = len(records)
        if n == 0:
            return None
        space = self.append_space  # (``check_append``'s first case inline)
        if space is not None and n < space.headroom:
            space.headroom -= n
        elif (guard := self.append_guard) is not None:
            guard(n, False)
        local = self._local
        lock = self._lock
        lock.acquire()
        try:
            if local.closed or local.writes.error is not None:
                local.check_open()  # (raises)
            info = append_plain(local, self._producer_state, self.leader_epoch_cache,
                                records, leader_epoch, inline_below, self._log_start_offset)
            if info is not None:
                end = local.end_metadata
                hw = end.message_offset
                if to_end and hw - local.recovery_point < local.config.flush_messages:
                    self.high_watermark, self._hw_meta = hw, end  # (``high_watermark_to_end``)
                    self._state_stamp += 1
                    if self._producer_state.unreplicated_txns:
                        self._producer_state.on_high_watermark_updated(hw)
                self._state_stamp += 1  # (``state_stamp``'s setter: a call only if mirrored)
                if self.stamp_cell is not None:
                    self.mirror_stamp(self.stamp_cell)
        except OSError as exc:
            lock.release()
            raise local.storage_error(exc, "append-async") from exc
        except BaseException:
            lock.release()
            raise
        lock.release()
        return info

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, log_start_offset=self._log_start_offset)

    def _prepare_leader_append(self, records: bytes | bytearray | memoryview,
                               leader_epoch: int, origin: AppendOrigin
                               ) -> tuple[AppendBatches, ProducerAnalysis | None]:
        """Under the lock, for the sync and the async append alike: validate and assign
        offsets from ``next_offset``, then ``_analyze``."""
        self._check_open()
        local = self._local
        v = leader_batches(records, local.config, now_ms=local.clock.milliseconds(),
                           offset=self.next_offset, leader_epoch=leader_epoch, origin=origin,
                           name=self._name, log_start_offset=self._log_start_offset)
        return v, self._analyze(v, origin)

    def _analyze(self, v: AppendBatches, origin: AppendOrigin) -> ProducerAnalysis | None:
        return analyze_append(v, origin, self._producer_state, self._local.config,
                              name=self._name, log_start_offset=self._log_start_offset)

    def _hand_over(self, v: AppendBatches, analysis: ProducerAnalysis, writer: AppendWriter,
                   done: WriteDone, inline_below: int) -> bool:
        """Settle the producer state and hand the write to ``writer`` (log_writes); False
        when written here instead, after the writes in flight: under ``inline_below`` bytes
        with none in flight, or an append that rolls or completes a transaction."""
        info = v.info
        size = len(v.records)
        local = self._local
        pending = local.writes
        seg = local.segments.active_segment
        new_epoch = starts_epoch(self.leader_epoch_cache.latest_epoch(), v.batches)
        if (pending.count == 0 and size < inline_below and not new_epoch) or \
                analysis.completed or roll_due(seg, pending, local.config, size, info,
                                               local.clock.milliseconds()):
            if pending.count:  # (none in flight: nothing changed since the lock was taken)
                pending.drain()
                self._check_open()
            self._write_analyzed(v, analysis, True, assign_epochs=new_epoch)
            return False
        # a new leader epoch: in the cache now, its checkpoint (fsynced) written aside before
        # the write is queued, as Kafka's assign flushes it within the append
        epochs = new_epoch and assign_epochs_of(self.leader_epoch_cache, v.batches, flush=False)
        pending.add(info.last_offset + 1, size)
        try:
            if epochs and checkpoint_aside(pending, writer, self.leader_epoch_cache.flush,
                                           local.storage_error):
                epochs = False
            after = self.leader_epoch_cache.flush if epochs else None
            pending.submit(writer, lambda: local.write_handed(
                seg, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                v.records, done, after))
        except BaseException:
            pending.finish(size, None)
            raise
        settle_producer_state(self._producer_state, analysis, info)
        self.state_stamp += 1
        return True

    def _write_analyzed(self, v: AppendBatches, analysis: ProducerAnalysis,
                        defer_flush: bool = False, *, assign_epochs: bool = True
                        ) -> LogAppendInfo:
        """``assign_epochs=False``: the caller knows no batch starts a newer leader epoch."""
        info = v.info
        local = self._local
        segment = self._maybe_roll(len(v.records), info)
        local.append(segment, info.last_offset, info.max_timestamp,
                     info.offset_of_max_timestamp, v.records)
        settle_producer_state(self._producer_state, analysis, info, segment)
        self.state_stamp += 1
        if assign_epochs:
            assign_epochs_of(self.leader_epoch_cache, v.batches)
        if not defer_flush and \
                local.log_end_offset - local.recovery_point >= local.config.flush_messages:
            self.flush()
        return info

    # -- roll ----------------------------------------------------------------------------------
    def _maybe_roll(self, size: int, info: LogAppendInfo) -> LogSegment:
        seg = self._local.segments.active_segment
        if self._local.should_roll(seg, size, info.max_timestamp, info.last_offset):
            return self.roll(info.first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, LEO); snapshot producer state there."""
        with self._io("roll"):
            self._check_open()
            local = self._local
            active = local.segments.active_segment
            seg = local.roll(expected_next_offset)
            if seg is active:
                return seg  # rolling an empty segment onto itself: nothing to do
            new_offset = seg.base_offset
            self._producer_state.update_map_end_offset(new_offset)
            self._producer_state.take_snapshot()
            local.schedule("flush-log", lambda: self.flush(new_offset), 0)
            return seg

    # -- flush and recovery point --------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync segments holding [recovery point, offset) and advance the recovery point."""
        with self._io("flush"):
            if not self._local.closed:
                self._local.flush_to(offset)

    def flush_outside_lock(self, offset: int) -> None:
        """``flush`` with the fsyncs outside the log's lock, as Kafka's UnifiedLog.flush (the
        lock only lists the segments and marks the recovery point): the broker's group commit
        flushes on a worker thread while appends go on. Raises KafkaStorageError on a failed
        fsync, or if the log was closed meanwhile (its records are then not known to be on
        disk: never acknowledge them)."""
        with self._io("flush"):
            self._check_open()
            plan = self._local.flush_plan(offset)
        if plan is not None:
            self._local.flush_outside_lock(plan, self._lock)

    # -- high watermark ------------------------------------------------------------------------
    def update_high_watermark(self, hw: int) -> int:
        """Set the HW clamped to [log start, LEO]; returns the value set (#87)."""
        with self._lock:
            self._set_hw(min(max(hw, self._log_start_offset), self.log_end_offset))
            return self.high_watermark

    def high_watermark_to_end(self) -> tuple[int, bool]:
        """``maybe_increment_high_watermark(log_end_offset)`` in one call, for a leader whose
        ISR is itself, after each append: (the LEO, whether the HW moved)."""
        with self._lock:
            end = self._local.end_metadata  # (``log_end_offset_metadata`` without a call)
            hw = end.message_offset
            if hw <= self.high_watermark:
                return hw, False
            self.high_watermark = hw  # (``_move_hw`` inline: after every append)
            self._state_stamp += 1
            if self.stamp_cell is not None:
                self.mirror_stamp(self.stamp_cell)
            self._hw_meta = end
            if self._producer_state.unreplicated_txns:
                self._producer_state.on_high_watermark_updated(hw)
            return hw, True

    def maybe_increment_high_watermark(self, hw: int) -> int | None:
        """Move the HW forward only; above the LEO is an error. Returns the old HW if moved.
        (``_set_hw`` inline: every append of a leader whose ISR is itself moves it.)"""
        with self._lock:
            end = self._local.end_metadata  # (``log_end_offset_metadata`` without a call)
            if hw > end.message_offset:
                raise ValueError(f"High watermark {hw} update exceeds current log end offset "
                                 f"{end.message_offset} of {self.name}")
            old = self.high_watermark
            if hw <= old:
                return None
            self._move_hw(hw, end)
            return old

    def _move_hw(self, hw: int, end: LogOffsetMetadata) -> None:
        """Under the lock: the HW to ``hw``, at most ``end`` (the LEO's metadata)."""
        self.high_watermark = hw
        self._state_stamp += 1  # (``state_stamp``'s setter: a call only if mirrored)
        if self.stamp_cell is not None:
            self.mirror_stamp(self.stamp_cell)
        self._hw_meta = end if hw == end.message_offset else None
        psm = self._producer_state
        if psm.unreplicated_txns:  # (its only work: no call without any)
            psm.on_high_watermark_updated(hw)

    def _set_hw(self, hw: int) -> None:
        """Under the lock: the HW set to ``hw`` (forward or back), at most the LEO."""
        self._move_hw(hw, self._local.log_end_offset_metadata)

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "") -> bool:
        """DeleteRecords / retention: raise the log start offset (never above the HW, #81)."""
        with self._lock:
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {offset} of partition "
                    f"{self.name} since it is larger than the high watermark {self.high_watermark}")
            if offset <= self._log_start_offset:
                return False
            log.info("Incremented log start offset of %s to %d (%s)", self.name, offset, reason)
            self._log_start_offset = offset
            local = self._local
            local.recovery_point = max(local.recovery_point, offset)
            self._producer_state.on_log_start_offset_incremented(offset)
            self.leader_epoch_cache.truncate_from_start(offset, flush_later=True)
            self.state_stamp += 1
            return True

    # -- reads ---------------------------------------------------------------------------------
    def read(self, start_offset: int, max_length: int,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchDataInfo:
        local = self._local
        end = local.log_end_offset_metadata
        hw_meta = self._hw_meta
        if isolation is FetchIsolation.LOG_END:
            bound = end
        elif isolation is FetchIsolation.HIGH_WATERMARK and hw_meta is not None:
            bound = hw_meta  # the common case: a single node moves the HW to the LEO
        else:
            off = self.high_watermark if isolation is FetchIsolation.HIGH_WATERMARK \
                else self.last_stable_offset
            bound = log_read.offset_metadata(local.segments, off, end)
        return local.read(start_offset, max_length,
                          log_read.ReadBounds(self._log_start_offset, end, bound),
                          min_one_message=min_one_message,
                          include_aborted=isolation is FetchIsolation.TXN_COMMITTED)

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata | None:
        """The HW with its segment and position, when known (an HW at the log end)."""
        return self._hw_meta

    def read_at_position(self, start_offset: int, max_length: int, segment_base: int,
                         position: int, copy_limit: int) -> bytes | None:
        """``log_read.read_at_position`` up to the HW, when its position is known."""
        bound = self._hw_meta
        return None if bound is None else log_read.read_at_position(
            self._local.segments, self._log_start_offset, bound, start_offset, max_length,
            segment_base, position, copy_limit)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        tiered = log_tiered_offsets.tiered_offset(self, timestamp)
        if tiered is not None:
            return tiered
        return log_read.fetch_offset_by_timestamp(
            self._local.segments, timestamp, log_start_offset=self._log_start_offset,
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

    # -- producers -----------------------------------------------------------------------------
    def wait_for_writes(self) -> None:
        """Return once every append handed to the writer is written: a leader becoming a
        follower starts fetching at a log end offset that no queued old-epoch write moves
        afterwards (Kafka's makeFollower holds the partition's write lock)."""
        with self._lock:
            self._local.writes.drain()

    def take_producer_snapshot(self) -> None:
        with self._lock:
            self._local.writes.drain()
            self._producer_state.take_snapshot()

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        with self._lock:
            self.state_stamp += 1
            return self._producer_state.remove_expired_producers(now_ms)

    # -- lifecycle -----------------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        self._local.config = self.config = config

    def close(self) -> None:
        """Snapshot producer state at the LEO (#103), then flush, trim and close segments."""
        with self._io("close"):
            if self._local.closed:
                return
            self._producer_state.update_map_end_offset(self.log_end_offset)
            self._producer_state.take_snapshot()
            self._local.close()
            self.state_stamp += 1

    def close_handlers(self) -> None:
        """Close file descriptors without flushing (a simulated crash / offline dir)."""
        with self._lock:
            self._local.close_handlers()
            self.state_stamp += 1

    def delete(self) -> None:
        """Delete every file of this log and its directory."""
        with self._lock:
            self._local.writes.drain()
            self._producer_state.truncate_fully_and_start_at(0)
            self._local.delete()
            self.state_stamp += 1

    def rename_dir(self, name: str) -> None:
        with self._lock:
            new_dir = self._local.rename_dir(name)
            self._name = self._local.name
            self._producer_state.dir = new_dir
            self.leader_epoch_cache.update_dir(new_dir)
            self._producer_state.rescan_snapshots()

    def _io(self, op: str) -> LogIo:
        """Hold the lock; an OSError becomes KafkaStorageError naming the log dir (Kafka).
        One LogIo per operation, made once (it keeps no state between uses)."""
        io = self._ios.get(op)
        if io is None:
            io = self._ios[op] = LogIo(self._lock, self._local.writes, op, self)
        return io

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self._log_start_offset}, end={self.log_end_offset}, "
                f"hw={self.high_watermark}, segments={len(self._local.segments)})")
