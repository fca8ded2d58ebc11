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
from typing import TYPE_CHECKING, Protocol

from tidelog.records import RecordBatch

from .errors import KafkaStorageError
from .log_append import LogAppendInfo
from .segment import LogSegment

if TYPE_CHECKING:
    from tidelog.config.log_config import LogConfig

log = logging.getLogger(__name__)

# Called on the writer thread once a write (or the no-op behind a duplicate or a synchronous
# append) is done: None, or the error that failed it (already a KafkaStorageError).
WriteDone = Callable[[BaseException | None], None]
Task = Callable[[], None]
# A write smaller than this, to a log with no write in flight, is made by the caller (the
# broker's tidelog.log.append.writer.inline.bytes). Measured with 1 MB batches of 1 KiB
# records (bench/baseline.py): the page-cache copy of 1 MB costs the loop about 0.2 ms of
# CPU, the hand-over 0.1-0.4 ms more CPU per append (the writer thread's and the loop's
# waits for the GIL) and a completion that reaches the loop 1 ms (median) to 9 ms later
# (the switch interval, the loop's next turn); with every batch of 64 KiB or more handed
# over, tidelog reached 0.41-0.44x of the minimal broker where writing on the loop reached
# 0.55-1.01x. Batches of 1 MiB and more are written on a worker thread anyway (the
# broker's heavy appends), so the writer takes what follows a write in flight and the
# appends that start a leader epoch.
INLINE_WRITE_BYTES = 1 << 20
# Leader epoch checkpoints written at once (aside from the writers): concurrent fsyncs share
# the file system's journal commits.
CHECKPOINT_THREADS = 8


class InDir(Protocol):
    """What ``AppendWriters.for_log`` asks of a log: its dir (a Log)."""

    @property
    def dir(self) -> Path: ...


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
        # each log's, remembered (a log never changes dirs: a move makes a new Log), by the
        # log's id with a weak reference to tell it from a later log at the same address (a
        # WeakKeyDictionary makes a new reference for every lookup); gone with its log
        self._by_log: dict[int, tuple[weakref.ref[InDir], AppendWriter]] = {}
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

    def for_log(self, lg: InDir) -> AppendWriter:
        """``for_dir`` of the log's dir (on the loop: one lookup per append)."""
        key = id(lg)
        known = self._by_log.get(key)
        if known is not None and known[0]() is lg:
            return known[1]
        w = self.for_dir(lg.dir.parent)
        by_log = self._by_log
        by_log[key] = (weakref.ref(lg, lambda _: by_log.pop(key, None)), w)
        return w

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            writers = list(self._writers.values())
        self._side.stop()  # the checkpoints in flight queue their held writes first
        for w in writers:
            w.stop()


def checkpoint_aside(pending: PendingWrites, writer: AppendWriter, checkpoint: Task,
                     to_error: Callable[[Exception], BaseException]) -> bool:
    """Hold the log's writes (``pending``) and run ``checkpoint`` (its leader epoch cache's
    flush) on the writer's side pool, which then releases them, failed with ``to_error`` of
    what it raised; False if a checkpoint is held already (the write then checkpoints on the
    writer, after it)."""
    if not pending.hold():
        return False

    def checkpoint_then_release() -> None:
        error: BaseException | None = None
        try:
            checkpoint()
        except Exception as e:
            error = to_error(e)
        finally:  # never leave the log's writes held (a drain would wait for ever)
            pending.release(writer, error)

    try:
        writer.side.submit(checkpoint_then_release)
    except BaseException:
        pending.release(writer)  # nothing held yet
        raise
    return True


def starts_epoch(latest: int | None, batches: list[RecordBatch]) -> bool:
    """Whether a batch carries a leader epoch newer than ``latest`` (the cache's)."""
    for b in batches:  # (a loop, not a generator: one batch per client append)
        epoch = b.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            return True
    return False


def roll_due(seg: LogSegment, pending: PendingWrites, cfg: LogConfig, size: int,
             info: LogAppendInfo, now: int) -> bool:
    """The roll check counting the writes in flight (their bytes and index entries)."""
    if pending.count and any(ix.entries + pending.count >= ix.max_entries
                             for ix in (seg.offset_index, seg.time_index)):
        return True
    return seg.should_roll(max_segment_ms=cfg.max_segment_ms,
                           max_segment_bytes=cfg.segment_bytes,
                           max_timestamp_in_messages=info.max_timestamp,
                           max_offset_in_messages=info.last_offset,
                           messages_size=size + pending.bytes, now=now)
