"""LocalLog: the part of a log on the local disk (Kafka's LocalLog): the dir, the segments,
the recovery point and the log end offset, the writes in flight to the dir's writer
(log_writes), rolls, flushes of segments, truncation and the deletion of segment files.

Not thread-safe on its own, as Kafka's: the Log (UnifiedLog) holds its lock around every
change; the log end offset (``log_end_offset_metadata``) is read without it, so it is
replaced whole, never mutated. Producer state, leader epochs, the log start offset and the
high watermark are the Log's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tidelog.config.log_config import LogConfig
from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler, TaskFn
from tidelog.util.slotted import slotted_maker
from tidelog.util.topic_partition import TopicPartition, parse_topic_partition_name

from . import log_read
from .errors import KafkaStorageError, StorageError
from .loader import open_segment
from .log_file_utils import DELETED_FILE_SUFFIX, log_file
from .log_files import delete_all, flush_plan, sync
from .log_writes import PendingWrites, WriteDone
from .segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)


_new_offset_metadata = slotted_maker(LogOffsetMetadata)  # (one per append: no Python __new__)


class FlushPlan(NamedTuple):
    """A flush up to ``target`` (exclusive): the segments holding [recovery point, target)
    and whether the dir is fsynced too (a segment was created since the last flush)."""

    target: int
    segments: list[LogSegment]
    sync_dir: bool


class LocalLog:
    """The segments of one partition on the local disk, from ``segments`` (loaded and
    recovered by the LogLoader) with the recovery point and log end offset it found."""

    # (slotted: the native plain append, log_plain.py, reads them at their offsets)
    __slots__ = ("__weakref__", "_dir", "_name", "clock", "closed", "config", "end_metadata",
                 "last_flush_time", "pending_deletes", "recovery_point", "scheduler",
                 "segments", "topic_partition", "writes")

    def __init__(self, dir: Path, config: LogConfig, segments: LogSegments,
                 recovery_point: int, next_offset_metadata: LogOffsetMetadata,
                 scheduler: Scheduler | None, clock: Clock) -> None:
        self._dir = Path(dir)
        self.config = config
        self.segments = segments
        self.recovery_point = recovery_point
        # the log end offset (``log_end_offset_metadata``; set here only, and by the plain
        # append, log_plain.py, as ``appended`` sets it)
        self.end_metadata = next_offset_metadata
        self.scheduler = scheduler
        self.clock = clock
        self.last_flush_time = clock.milliseconds()
        # segments renamed .deleted whose files go at the next delete_pending_files (no
        # scheduler to delete them after file.delete.delay.ms)
        self.pending_deletes: list[LogSegment] = []
        # Kafka's isMemoryMappedBufferClosed: no disk I/O once closed (close, close_handlers,
        # delete)
        self.closed = False
        self.writes = PendingWrites()  # appends handed to the dir's writer (log_writes)
        try:
            self.topic_partition: TopicPartition | None = \
                parse_topic_partition_name(self._dir.name)
        except ValueError:
            self.topic_partition = None
        self._name = str(self.topic_partition) if self.topic_partition is not None \
            else self._dir.name

    # -- state ---------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def name(self) -> str:
        """The partition (``topic-N``), or the dir's name when it names none."""
        return self._name

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self.end_metadata

    @property
    def log_end_offset(self) -> int:
        return self.end_metadata.message_offset

    @property
    def next_offset(self) -> int:
        """Where the next append's offsets start: the LEO, or past the writes in flight."""
        w = self.writes
        return w.next_offset if w.count else self.end_metadata.message_offset

    def update_log_end_offset(self, end_offset: int) -> None:
        """The end at ``end_offset`` in the active segment, the recovery point not past it."""
        active = self.segments.active_segment
        self.end_metadata = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        if self.recovery_point > end_offset:
            self.recovery_point = end_offset

    def check_open(self) -> None:
        """Kafka's checkIfMemoryMappedBufferClosed; and no earlier write failed (the offsets
        and the files would disagree)."""
        if self.closed:
            raise KafkaStorageError(f"The log for {self._name} is closed")
        self.writes.check(self._name)

    def storage_error(self, e: Exception, op: str = "append") -> Exception:
        """``e`` as the KafkaStorageError naming the dir and ``op`` (a StorageError as it
        is)."""
        if isinstance(e, StorageError):
            return e
        error = KafkaStorageError(f"Error while {op} in dir {self._dir} ({self._name}): {e}")
        error.__cause__ = e  # the OSError behind it: the log dir failure channel's cue
        return error

    def schedule(self, name: str, fn: TaskFn, delay_ms: int) -> None:
        """Run ``fn`` on the scheduler after ``delay_ms``; here and now without one."""
        if self.scheduler is None:
            fn()
        else:
            self.scheduler.schedule(name, fn, delay_ms)

    # -- append and roll -----------------------------------------------------------------------
    def append(self, segment: LogSegment, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int, records: bytes | bytearray | memoryview) -> None:
        """Write to ``segment`` (the active one) and move the log end offset past it."""
        segment.append(last_offset, max_timestamp, offset_of_max_timestamp, records)
        self.appended(segment, last_offset)

    def appended(self, segment: LogSegment, last_offset: int, size: int | None = None) -> None:
        """The log end offset past ``last_offset``, written to ``segment``, whose size is
        ``size`` now (None: read from it)."""
        self.end_metadata = _new_offset_metadata(
            last_offset + 1, segment.base_offset, segment.size if size is None else size)

    def write_handed(self, seg: LogSegment, last_offset: int, max_timestamp: int,
                     offset_of_max_timestamp: int, records: bytes | bytearray | memoryview,
                     done: WriteDone, after: Callable[[], None] | None) -> None:
        """On the writer's thread, for a write handed over (``writes``): ``append``, then
        ``after`` (the leader epoch checkpoint of an append that started an epoch), then
        ``done`` with the error that failed them or an earlier write, if any."""
        pending = self.writes
        error: BaseException | None = pending.error
        try:
            if error is None and self.closed:
                error = KafkaStorageError(f"The log for {self._name} is closed")
            if error is None:
                self.append(seg, last_offset, max_timestamp, offset_of_max_timestamp, records)
                if after is not None:
                    after()
        except Exception as e:  # a disk error, or a segment refusing the write: broken log
            error = self.storage_error(e)
        pending.finish(len(records), error)
        done(error)

    def should_roll(self, seg: LogSegment, size: int, max_timestamp: int,
                    last_offset: int) -> bool:
        """Whether an append of ``size`` bytes up to ``last_offset`` goes to a new segment
        (segment.bytes, segment.ms, a full index, offsets too far from the base)."""
        config = self.config
        return seg.should_roll(max_segment_ms=config.max_segment_ms,
                               max_segment_bytes=config.segment_bytes,
                               max_timestamp_in_messages=max_timestamp,
                               max_offset_in_messages=last_offset,
                               messages_size=size, now=self.clock.milliseconds())

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """A new active segment at max(expected, LEO); the active one itself when it is empty
        and based there already (nothing to do)."""
        self.check_open()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.active_segment
        if new_offset == active.base_offset and active.size == 0:
            return active
        if new_offset <= active.base_offset:
            raise KafkaStorageError(
                f"Trying to roll a new log segment for {self._name} with start offset "
                f"{new_offset} <= the active segment's base {active.base_offset}")
        if log_file(self._dir, new_offset).exists():
            log.warning("Deleting stale segment files at %d in %s", new_offset, self._dir)
            open_segment(self._dir, new_offset, self.config, self.clock).delete()
        active.on_becoming_inactive()
        seg = open_segment(self._dir, new_offset, self.config, self.clock,
                           preallocate=self.config.preallocate)
        self.segments.add(seg)
        self.update_log_end_offset(self.log_end_offset)
        return seg

    # -- flush ---------------------------------------------------------------------------------
    def flush_plan(self, offset: int | None) -> FlushPlan | None:
        """What flushing to ``offset`` (None: the LEO) takes; None: flushed already."""
        plan = flush_plan(self.segments, self.log_end_offset, self.recovery_point, offset)
        return None if plan is None else FlushPlan(*plan)

    def flush(self, plan: FlushPlan) -> None:
        """fsync the plan's segments (and the dir); the recovery point is not moved."""
        sync(plan.segments, self._dir if plan.sync_dir else None)

    def flush_to(self, offset: int | None) -> None:
        """``flush`` to ``offset`` (None: the LEO), then ``mark_flushed``."""
        plan = self.flush_plan(offset)
        if plan is not None:
            self.flush(plan)
            self.mark_flushed(plan.target)

    def flush_outside_lock(self, plan: FlushPlan, lock: threading.RLock) -> None:
        """``flush`` without the log's ``lock``, then ``mark_flushed`` under it. Raises
        KafkaStorageError on a failed fsync, or if the log was closed meanwhile."""
        try:
            self.flush(plan)
        except (OSError, StorageError) as e:
            with lock:
                closed = self.closed
            if closed:  # closed under us (deleted, dir offline): not a disk error of its own
                raise KafkaStorageError(f"The log for {self._name} was closed during its "
                                        "flush") from None
            raise KafkaStorageError(
                f"Error while flush in dir {self._dir} ({self._name}): {e}") from e
        with lock:
            self.check_open()
            self.mark_flushed(plan.target)

    def mark_flushed(self, target: int) -> None:
        """The recovery point at ``target`` (never back: a concurrent flush may have gone
        further, never past the LEO)."""
        if target > self.recovery_point:
            self.recovery_point = min(target, self.log_end_offset)
            self.last_flush_time = self.clock.milliseconds()

    # -- reads ---------------------------------------------------------------------------------
    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """``offset`` with its segment and position (Kafka's convertToOffsetMetadataOrThrow)."""
        return log_read.offset_metadata(self.segments, offset, self.end_metadata)

    def read(self, start_offset: int, max_length: int, bounds: log_read.ReadBounds, *,
             min_one_message: bool, include_aborted: bool) -> FetchDataInfo:
        """Records from ``start_offset`` within ``bounds`` (the caller's snapshot of the log
        start, the end and the isolation's bound), the transactions aborted in them when
        ``include_aborted``."""
        return log_read.read(self.segments, bounds, start_offset, max_length,
                             min_one_message=min_one_message, include_aborted=include_aborted,
                             path=self.topic_partition or self._dir.name)

    # -- deletion and truncation ---------------------------------------------------------------
    def remove_and_delete_segments(self, segs: list[LogSegment], reason: str) -> None:
        """Drop from lookups, rename to .deleted now, remove after file.delete.delay.ms."""
        for seg in segs:
            self.segments.remove(seg.base_offset)
        for seg in segs:
            log.info("Deleting segment %s of %s due to %s", seg.base_offset, self._name, reason)
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        if self.scheduler is not None:
            self.schedule("delete-file", lambda: delete_all(segs),
                          self.config.file_delete_delay_ms)
        else:
            self.pending_deletes.extend(segs)
            self.delete_pending_files()

    def delete_pending_files(self) -> None:
        pending, self.pending_deletes = self.pending_deletes, []
        delete_all(pending)

    def truncate_to(self, target: int) -> list[LogSegment]:
        """Cut the segments back to ``target`` (below the LEO, at or above the first
        segment's base); returns the segments deleted."""
        deleted = self.segments.higher_segments(target)
        self.remove_and_delete_segments(deleted, "truncation")
        self.segments.active_segment.truncate_to(target)
        self.update_log_end_offset(target)
        return deleted

    def truncate_fully_and_start_at(self, offset: int) -> list[LogSegment]:
        """Every segment deleted, one empty segment at ``offset``, flushed to it."""
        self.check_open()
        old = self.segments.values()
        for seg in old:
            self.segments.remove(seg.base_offset)
        for seg in old:
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        self.segments.add(open_segment(self._dir, offset, self.config, self.clock,
                                       preallocate=self.config.preallocate))
        self.end_metadata = LogOffsetMetadata(offset, offset, 0)
        self.recovery_point = offset
        self.schedule("delete-file", lambda: delete_all(old), self.config.file_delete_delay_ms)
        return old

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Flush, trim and close the segments; delete the files pending deletion."""
        self.segments.close()
        self.delete_pending_files()
        self.closed = True

    def close_handlers(self) -> None:
        """Close file descriptors without flushing (a simulated crash / offline dir)."""
        self.writes.drain()
        self.segments.close_handlers()
        self.closed = True

    def delete(self) -> None:
        """Delete every segment, every other file of the dir, and the dir."""
        self.writes.drain()
        for seg in self.segments.values():
            seg.delete()
        self.segments.clear()
        self.delete_pending_files()
        for p in self._dir.iterdir() if self._dir.exists() else []:
            if p.is_file():
                p.unlink(missing_ok=True)
        if self._dir.exists():
            self._dir.rmdir()
        self.closed = True

    def rename_dir(self, name: str) -> Path:
        """Move the dir to ``name`` beside it; returns the new dir."""
        self.writes.drain()
        new_dir = self._dir.parent / name
        os.rename(self._dir, new_dir)
        self._dir = new_dir
        if self.topic_partition is None:
            self._name = new_dir.name
        self.segments.update_parent_dir(new_dir)
        return new_dir

    def __repr__(self) -> str:
        return (f"LocalLog({self._dir}, end={self.log_end_offset}, "
                f"recovery_point={self.recovery_point}, segments={len(self.segments)})")
