"""Segment appends off the caller's thread: a writer thread per log dir, in order.

The caller (the broker's event loop) validates a batch, assigns its offsets and updates the
producer state as before, then hands the bytes to the log dir's ``AppendWriter``; the thread
writes them to the segment (file and indexes) and only then moves the log end offset, so
readers, flushes and the high watermark never see a byte that is not written. Each log keeps
its ``PendingWrites``: how many of its writes are queued, the offset after the last one
handed over (where the next batch's offsets start) and their bytes (the roll check counts
them). Anything else that changes the log's files (roll, truncation, retention, deletion,
close) first waits for them (``drain``), under the log's lock so no new write is queued
meanwhile. A failed write fails every later write of the log and every later append; the
broker takes the log dir offline as for a synchronous write.

One thread per dir keeps a log's writes in order (a log lives in one dir) and lets dirs on
different disks write in parallel; ``done`` runs on the writer thread (the broker moves its
completion to the loop).

An append that starts a leader epoch must not be acknowledged before the epoch's checkpoint
is on disk (Kafka's ``assign`` fsyncs it within the append). That checkpoint (tmp, fsync,
rename, dir fsync) is written aside, on a small pool shared by the writers, while the log's
own writes are held back (``PendingWrites.hold``) and the writer goes on with the other logs
of its dir: the first appends to 1,000 new partitions cost about one fsync together (the file
system commits concurrent fsyncs in one journal commit), not 1,000 fsyncs in a row.
"""

from __future__ import annotations

import logging
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.records import RecordBatch

from .errors import KafkaStorageError, StorageError
from .log_append import AppendBatches, LogAppendInfo, analyze_producer_state, duplicate_info
from .segment import LogOffsetMetadata, LogSegment
from .validator import AppendOrigin, validate_and_assign_offsets

if TYPE_CHECKING:
    from .log import Log

log = logging.getLogger(__name__)

# Called on the writer thread once a write (or the no-op behind a duplicate or a synchronous
# append) is done: None, or the error that failed it (already a KafkaStorageError).
WriteDone = Callable[[BaseException | None], None]
Task = Callable[[], None]
# A write smaller than this, to a log with no write in flight, is made by the caller: a page
# cache copy of a few KiB costs less than the two thread hand-offs (and their waits for the
# GIL) that a writer thread adds to the append's latency.
INLINE_WRITE_BYTES = 64 << 10
# Leader epoch checkpoints written at once (aside from the writers): concurrent fsyncs share
# the file system's journal commits.
CHECKPOINT_THREADS = 8


class PendingWrites:
    """One log's writes handed to its dir's writer and not done yet."""

    __slots__ = ("_cond", "bytes", "count", "error", "held", "next_offset")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.count = 0
        self.next_offset = 0  # the offset after the last write handed over (count > 0)
        self.bytes = 0  # bytes of the queued writes to the active segment
        self.error: BaseException | None = None  # the first failed write's
        # the log's tasks waiting for its leader epoch checkpoint (None: not held)
        self.held: list[Task] | None = None

    def add(self, next_offset: int, size: int) -> None:
        with self._cond:
            self.count += 1
            self.next_offset = next_offset
            self.bytes += size

    def finish(self, size: int, error: BaseException | None) -> None:
        with self._cond:
            self.count -= 1
            self.bytes -= size
            if error is not None and self.error is None:
                self.error = error
            if self.count == 0:
                self._cond.notify_all()

    def submit(self, writer: AppendWriter, task: Task) -> None:
        """Queue ``task`` on ``writer`` after the log's earlier tasks, held ones included."""
        with self._cond:
            if self.held is not None:
                self.held.append(task)
            else:
                writer.submit(task)

    def hold(self) -> bool:
        """Hold the log's next tasks back until ``release``; False if already held."""
        with self._cond:
            if self.held is not None:
                return False
            self.held = []
            return True

    def release(self, writer: AppendWriter, error: BaseException | None = None) -> None:
        """Queue the held tasks in order; ``error`` (a failed checkpoint) fails them and
        every later write of the log. A task the writer refuses (stopping) runs here and
        fails, as do the ones after it."""
        failed: list[Task] = []
        with self._cond:
            held, self.held = self.held or [], None
            if error is not None and self.error is None:
                self.error = error
            for task in held:
                if not failed:
                    try:
                        writer.submit(task)
                        continue
                    except KafkaStorageError as exc:
                        if self.error is None:
                            self.error = exc
                failed.append(task)
        for task in failed:  # they see ``error`` and report it
            task()

    def drain(self) -> None:
        """Wait until no write of the log is queued or running."""
        with self._cond:
            while self.count:
                self._cond.wait()

    def check(self, name: str) -> None:
        """Raise if an earlier write failed: the log's offsets and files disagree now."""
        if self.error is not None:
            raise KafkaStorageError(f"An earlier write to {name} failed: {self.error}")


class SideTasks:
    """A small pool for the work a writer hands aside (leader epoch checkpoints)."""

    def __init__(self, threads: int = CHECKPOINT_THREADS) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def submit(self, task: Task) -> None:
        with self._lock:
            if self._stopped:
                raise KafkaStorageError("The append writers are stopped")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._threads,
                                                thread_name_prefix="tidelog-epoch-checkpoint")
            self._pool.submit(task)

    def stop(self) -> None:
        """Run what was submitted (submits after this fail)."""
        with self._lock:
            self._stopped = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class AppendWriter:
    """A thread running tasks in the order submitted (the segment writes of one log dir);
    ``side`` runs what its writes hand aside (its own pool unless shared)."""

    def __init__(self, name: str, side: SideTasks | None = None) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._own_side = side is None
        self.side = side if side is not None else SideTasks()

    def submit(self, task: Task) -> None:
        with self._lock:
            if self._stopped:
                raise KafkaStorageError(f"The append writer of {self._name} is stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"tidelog-append-{self._name}")
                self._thread.start()
        self._queue.put(task)

    def stop(self) -> None:
        """Run what was submitted, then end the thread (submits after this fail)."""
        if self._own_side:
            self.side.stop()  # held writes are queued here before the thread ends
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _run(self) -> None:
        while (task := self._queue.get()) is not None:
            try:
                task()
            except Exception:  # a task reports its own errors; this keeps the thread alive
                log.exception("append writer task of %s failed", self._name)


class AppendWriters:
    """The writer of each log dir, made on first use."""

    def __init__(self) -> None:
        self._writers: dict[Path, AppendWriter] = {}
        # each log's, remembered (a log never changes dirs: a move makes a new Log)
        self._by_log: weakref.WeakKeyDictionary[Log, AppendWriter] = weakref.WeakKeyDictionary()
        self._side = SideTasks()  # shared: checkpoints of every dir at once
        self._lock = threading.Lock()
        self._stopped = False

    def for_dir(self, log_dir: Path) -> AppendWriter:
        with self._lock:
            w = self._writers.get(log_dir)
            if w is None:
                w = self._writers[log_dir] = AppendWriter(log_dir.name or str(log_dir),
                                                          self._side)
                if self._stopped:
                    w.stop()  # the broker is stopping: its submits fail
            return w

    def for_log(self, lg: Log) -> AppendWriter:
        """``for_dir`` of the log's dir (on the loop: one lookup per append)."""
        w = self._by_log.get(lg)
        if w is None:
            w = self._by_log[lg] = self.for_dir(lg.dir.parent)
        return w

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            writers = list(self._writers.values())
        self._side.stop()  # the checkpoints in flight queue their held writes first
        for w in writers:
            w.stop()


def hand_over(lg: Log, records: bytes | bytearray | memoryview, leader_epoch: int,
              origin: AppendOrigin, writer: AppendWriter, done: WriteDone,
              inline_below: int = INLINE_WRITE_BYTES) -> tuple[LogAppendInfo, bool]:
    """Under the log's lock: validate at ``next_offset``, settle the producer state and hand
    the write to ``writer``. Returns the answer and whether the write went to the writer;
    not for a duplicate, nor for a write under ``inline_below`` bytes with none in flight, nor
    for an append that rolls or completes a transaction: those are written here, after the
    writes in flight."""
    lg._check_open()
    res = validate_and_assign_offsets(
        records, lg.config, now_ms=lg.clock.milliseconds(), offset=lg.next_offset,
        leader_epoch=leader_epoch, origin=origin, topic_partition=lg.name)
    info = LogAppendInfo(
        res.first_offset, res.last_offset, res.max_timestamp, res.offset_of_max_timestamp,
        res.log_append_time, lg.log_start_offset, res.num_messages, res.batch.size_in_bytes)
    v = AppendBatches(res.records, [res.batch], info)
    size = len(v.records)
    lg._check_size(size)
    analysis = analyze_producer_state(lg.producer_state, v.batches, origin)
    if analysis.duplicate is not None:
        return duplicate_info(info, analysis.duplicate,
                              log_append_time=lg.config.log_append_time,
                              log_start_offset=lg.log_start_offset), False
    pending = lg._writes
    new_epoch = starts_epoch(lg, v.batches)
    if (pending.count == 0 and size < inline_below and not new_epoch) or analysis.completed \
            or roll_due(lg, size, info):
        pending.drain()
        lg._check_open()
        return lg._write_analyzed(v, analysis, True, assign_epochs=new_epoch), False
    seg = lg.active_segment
    # a new leader epoch: in the cache now, its checkpoint (fsynced) written aside before
    # the write is queued, as Kafka's assign flushes it within the append
    epochs = new_epoch and lg._maybe_assign_epochs(v.batches, flush=False)
    pending.add(info.last_offset + 1, size)
    try:
        if epochs and _checkpoint_aside(lg, writer):
            epochs = False
        pending.submit(writer, lambda: write(lg, seg, info, v.records, done, epochs))
    except BaseException:
        pending.finish(size, None)
        raise
    lg._settle_producer_state(analysis, info, v.batches, assign_epochs=False)
    return info, True


def _checkpoint_aside(lg: Log, writer: AppendWriter) -> bool:
    """Hold the log's writes and write its leader epoch checkpoint on the writer's side
    pool, which then releases them; False if a checkpoint is held already (the write then
    checkpoints on the writer, after it)."""
    pending = lg._writes
    if not pending.hold():
        return False
    try:
        writer.side.submit(lambda: _checkpoint_then_release(lg, writer))
    except BaseException:
        pending.release(writer)  # nothing held yet
        raise
    return True


def _checkpoint_then_release(lg: Log, writer: AppendWriter) -> None:
    """On the side pool: the checkpoint, then the held writes (failed if it failed)."""
    error: BaseException | None = None
    try:
        lg.leader_epoch_cache.flush()
    except Exception as e:
        error = _storage_error(lg, e)
    finally:  # never leave the log's writes held (a drain would wait for ever)
        lg._writes.release(writer, error)


def starts_epoch(lg: Log, batches: list[RecordBatch]) -> bool:
    """Whether a batch carries a leader epoch newer than the cache's latest."""
    latest = lg.leader_epoch_cache.latest_epoch()
    for b in batches:  # (a loop, not a generator: one batch per client append)
        epoch = b.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            return True
    return False


def roll_due(lg: Log, size: int, info: LogAppendInfo) -> bool:
    """The roll check counting the writes in flight (their bytes and index entries)."""
    seg = lg.active_segment
    pending = lg._writes
    if pending.count and any(ix.entries + pending.count >= ix.max_entries
                             for ix in (seg.offset_index, seg.time_index)):
        return True
    cfg = lg.config
    return seg.should_roll(max_segment_ms=cfg.max_segment_ms,
                           max_segment_bytes=cfg.segment_bytes,
                           max_timestamp_in_messages=info.max_timestamp,
                           max_offset_in_messages=info.last_offset,
                           messages_size=size + pending.bytes, now=lg.clock.milliseconds())


def write(lg: Log, seg: LogSegment, info: LogAppendInfo,
          records: bytes | bytearray | memoryview, done: WriteDone,
          flush_epochs: bool = False) -> None:
    """On the writer's thread: write, then move the log end offset past it (and write the
    leader epoch checkpoint when the append started an epoch), then ``done``."""
    pending = lg._writes
    error: BaseException | None = pending.error
    try:
        if error is None and lg.closed:
            error = KafkaStorageError(f"The log for {lg.name} is closed")
        if error is None:
            seg.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
                       records)
            lg._end = LogOffsetMetadata(info.last_offset + 1, seg.base_offset, seg.size)
            if flush_epochs:
                lg.leader_epoch_cache.flush()
    except Exception as e:  # a disk error, or a segment refusing the write: the log is broken
        error = _storage_error(lg, e)
    pending.finish(len(records), error)
    done(error)


def _storage_error(lg: Log, e: Exception) -> BaseException:
    if isinstance(e, StorageError):
        return e
    error = KafkaStorageError(f"Error while append in dir {lg.dir} ({lg.name}): {e}")
    error.__cause__ = e  # the OSError behind it: the log dir failure channel's cue
    return error
