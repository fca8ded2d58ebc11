"""Leader epoch cache and its ``leader-epoch-checkpoint`` file (Kafka's LeaderEpochFileCache).

Entries ``(epoch, start offset)`` with both strictly increasing, persisted in the partition
dir as a version-0 text checkpoint with lines ``<epoch> <startOffset>`` (reference §1.13).
The cache is derived data: recovery rebuilds it from the batches' partitionLeaderEpoch.

The entries change in memory under a short lock (the event loop changes them); a flush
copies them under it and writes the copy outside it (tmp, fsync, rename), so nothing waits
for a disk to change the entries. Each change has a version: a flush writes only a copy
newer than the one on disk, so an earlier flush finishing late never overwrites a later
one (Kafka writes under its cache lock, which makes the same order).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidelog.util.scheduler import Scheduler

from .checkpoints import CheckpointFile, CorruptCheckpointError

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


# the caches whose checkpoint a scheduled write has yet to bring up to date, by path: a cache
# opened on that path (the log reopened in this process) makes that write first
_pending_writes: dict[Path, LeaderEpochFileCache] = {}
_pending_lock = threading.Lock()


def _write_pending(path: Path) -> None:
    """The scheduled write of ``path``'s earlier cache, if not made yet, made now (or waited
    for, if under way)."""
    with _pending_lock:
        cache = _pending_writes.get(path)
    if cache is not None:
        cache._write_if_dir_exists(path)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class _EpochFormatter:
    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch} {entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry | None:
        parts = line.split()
        if len(parts) != 2:
            return None
        try:
            return EpochEntry(int(parts[0]), int(parts[1]))
        except ValueError:
            return None


class LeaderEpochFileCache:
    """The entries, and the checkpoint they are written to.

    A LeaderAndIsr making this broker leader assigns its epoch ``pending`` (``assign(...,
    pending=True)``): an entry every epoch lookup sees at once (a follower asking for the
    end of an earlier epoch gets its start), written by the LeaderAndIsr's log thread before
    it is answered. Until written it is not among the ``live_entries``, the ones appends are
    checked against (``latest_epoch``): an append of its epoch meanwhile starts it as any
    append starting an epoch does, its checkpoint written before the append's bytes, so no
    record of an epoch is written before the checkpoint naming it is on disk (Kafka's
    makeLeader holds the partition's write lock while it writes it)."""

    __slots__ = ("_all", "_file", "_flushed_version", "_lock", "_scheduler", "_version",
                 "_write_lock", "io_error_handler", "live_entries")  # (read natively)

    def __init__(self, dir: Path, scheduler: Scheduler | None = None) -> None:
        self._file = CheckpointFile(Path(dir) / LEADER_EPOCH_CHECKPOINT_FILE, 0,
                                    _EpochFormatter())
        # where a truncation's checkpoint is written (``flush_later``: Kafka's scheduler
        # task leader-epoch-cache-flush); None: written at once, on the truncating thread
        self._scheduler = scheduler
        # told of a scheduled write's I/O error (the LogManager: the dir goes offline, as
        # Kafka's LogDirFailureChannel in the checkpoint's writeIfDirExists)
        self.io_error_handler: Callable[[OSError], object] | None = None
        self._lock = threading.RLock()
        # the version of the entries (one more at each change) and the one last written;
        # writes one at a time, in version order (``flush``)
        self._version = 0
        self._flushed_version = 0
        self._write_lock = threading.Lock()
        # every entry in epoch order, a pending one last (see the class)
        self._all: list[EpochEntry] = []
        # the entries appends are checked against: ``_all`` but a pending last entry.
        # Never changed in place: every change puts a new list here, so the plain append
        # (log_plain) reads it without the lock (under its log's lock), as ``latest_epoch``
        # without a call
        self.live_entries: list[EpochEntry] = []
        _write_pending(self.path)
        try:
            for e in self._file.read():
                self._assign(e.epoch, e.start_offset)
        except (CorruptCheckpointError, FileNotFoundError) as exc:
            log.warning("Ignoring unreadable %s (rebuilt from the log): %s", self.path, exc)
            self._set([])
        self._flushed_version = self._version  # (what was read is what the file says)

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> list[EpochEntry]:
        """Every entry, a pending one too."""
        with self._lock:
            return list(self._all)

    def latest_epoch(self) -> int | None:
        """The latest epoch an append is checked against (a pending one is not yet)."""
        with self._lock:
            return self.live_entries[-1].epoch if self.live_entries else None

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._all[0] if self._all else None

    @property
    def unflushed(self) -> bool:
        """Whether the entries in memory differ from the checkpoint last written."""
        return self._version != self._flushed_version

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True,
               pending: bool = False) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (#148); flushes if changed
        (``flush=False``: the caller calls ``flush`` before the append is acknowledged).
        ``pending`` (a LeaderAndIsr's, never flushed here): see the class. An append's
        assign of the pending epoch makes it live: True, the caller flushes it."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry "
                             f"(epoch {epoch}, start offset {start_offset})")
        with self._lock:
            changed = self._assign(epoch, start_offset, pending)
        if changed and flush and not pending:
            self.flush()
        return changed

    def flush(self) -> None:
        """Write the checkpoint (tmp, fsync, rename) with the entries now in memory, unless
        a later flush wrote them (or newer ones) already; on return they are on disk, and a
        pending entry among them is live."""
        with self._lock:
            entries, version = self._all, self._version
        with self._write_lock:
            if version > self._flushed_version:
                self._file.write(entries)
                self._flushed_version = version
            with self._lock:
                if self._version == self._flushed_version:
                    self.live_entries = self._all

    def _assign(self, epoch: int, start_offset: int, pending: bool = False) -> bool:
        last = self._all[-1] if self._all else None
        if last is not None and last.epoch == epoch and last.start_offset <= start_offset:
            if pending or self.live_entries is self._all:
                return False  # the latest epoch at the same or a later start: nothing new
            self.live_entries = self._all  # the pending epoch's first append: live now
            return True  # (its version counted already: the caller's flush writes it)
        entries = [e for e in self._all if e.epoch < epoch and e.start_offset < start_offset]
        entries.append(EpochEntry(epoch, start_offset))
        self._set(entries, pending)
        return True

    def _set(self, entries: list[EpochEntry], pending: bool = False) -> None:
        """The new entries (under the lock), the last one ``pending``: new lists, complete
        (see live_entries)."""
        self._all = entries
        self.live_entries = entries[:-1] if pending else entries
        self._version += 1

    def _kept(self, entries: list[EpochEntry]) -> None:
        """``_set`` after a truncation: a pending last entry still last stays pending."""
        pending = self.live_entries is not self._all and bool(entries) and \
            entries[-1] == self._all[-1]
        self._set(entries, pending)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, its end offset) as OffsetsForLeaderEpoch needs (#149)."""
        with self._lock:
            entries = self._all
            if epoch == UNDEFINED_EPOCH or not entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epoch == entries[-1].epoch:
                return epoch, log_end_offset
            if epoch > entries[-1].epoch:  # newer than any known epoch, as Kafka
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epoch < entries[0].epoch:
                return epoch, entries[0].start_offset
            floor = max((e for e in entries if e.epoch <= epoch), key=lambda e: e.epoch)
            nxt = min((e for e in entries if e.epoch > epoch), key=lambda e: e.epoch)
            return floor.epoch, nxt.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``."""
        with self._lock:
            found = None
            for e in self._all:
                if e.start_offset <= offset:
                    found = e.epoch
            return found

    def truncate_from_end(self, end_offset: int, *, flush_later: bool = False) -> None:
        """Remove entries starting at or after ``end_offset`` (#150). ``flush_later``: the
        checkpoint is written on the scheduler (Kafka's truncateFromEndAsyncFlush,
        KAFKA-16541): an entry it still names after a crash starts at or past the log's
        end, and the loader drops it (``truncate_from_end`` at the recovered end)."""
        with self._lock:
            kept = [e for e in self._all if e.start_offset < end_offset]
            changed = len(kept) != len(self._all)
            if changed:
                self._kept(kept)
        if changed:
            self._write(flush_later)

    def _write(self, later: bool) -> None:
        """The checkpoint written now (``flush``), or ``later``: on the scheduler, as
        Kafka's async flushes (KAFKA-16541), the caller not waiting for the disk."""
        if not later or self._scheduler is None:
            self.flush()
            return
        path = self.path
        with _pending_lock:
            _pending_writes[path] = self
        task = self._scheduler.schedule(f"leader-epoch-cache-flush-{path.parent.name}",
                                        lambda: self._write_if_dir_exists(path))
        if task.cancelled:  # a stopped scheduler takes no task (Kafka ignores it): now
            self._write_if_dir_exists(path)

    def _write_if_dir_exists(self, path: Path) -> None:
        """The scheduled write (Kafka's writeIfDirExists): none for a dir deleted meanwhile;
        an I/O error goes to ``io_error_handler`` (the dir offline). Then ``path`` has no
        write pending, unless entries changed since need one (scheduled too)."""
        failed = True
        try:
            self.flush()
            failed = False
        except FileNotFoundError:
            log.debug("Not writing %s: its dir is gone", self.path)
        except OSError as exc:
            log.warning("Cannot write %s: %s", self.path, exc)
            if self.io_error_handler is not None:
                self.io_error_handler(exc)
        with _pending_lock:
            if (failed or not self.unflushed) and _pending_writes.get(path) is self:
                del _pending_writes[path]

    def truncate_from_start(self, start_offset: int, *, flush_later: bool = False) -> None:
        """Drop entries below ``start_offset``, re-adding the last one at it (#150).
        ``flush_later``: the checkpoint is written on the scheduler (Kafka's
        truncateFromStartAsyncFlush, KAFKA-16541): entries it still names after a crash
        start below the log start, and the loader drops them (``truncate_from_start`` at
        the checkpointed log start)."""
        with self._lock:
            removed = [e for e in self._all if e.start_offset <= start_offset]
            if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
                return
            kept = [e for e in self._all if e.start_offset > start_offset]
            self._kept([EpochEntry(removed[-1].epoch, start_offset), *kept])
        self._write(flush_later)

    def clear_and_flush(self) -> None:
        with self._lock:
            self._set([])
        self.flush()

    def update_dir(self, dir: Path) -> None:
        self._file = CheckpointFile(Path(dir) / LEADER_EPOCH_CHECKPOINT_FILE, 0,
                                    _EpochFormatter())
