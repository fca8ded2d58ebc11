"""Leader epoch cache and its ``leader-epoch-checkpoint`` file (Kafka's LeaderEpochFileCache).

Entries ``(epoch, start offset)`` with both strictly increasing, persisted in the partition
dir as a version-0 text checkpoint with lines ``<epoch> <startOffset>`` (reference §1.13).
The cache is derived data: recovery rebuilds it from the batches' partitionLeaderEpoch.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from .checkpoints import CheckpointFile, CorruptCheckpointError

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


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
    def __init__(self, dir: Path) -> None:
        self._file = CheckpointFile(Path(dir) / LEADER_EPOCH_CHECKPOINT_FILE, 0,
                                    _EpochFormatter())
        self._lock = threading.RLock()
        # the entries in epoch order; never changed in place: every change puts a new list
        # here, so the plain append (log_plain) reads it without the lock (under its log's
        # lock), as ``latest_epoch`` without a call
        self.live_entries: list[EpochEntry] = []
        try:
            for e in self._file.read():
                self._assign(e.epoch, e.start_offset)
        except (CorruptCheckpointError, FileNotFoundError) as exc:
            log.warning("Ignoring unreadable %s (rebuilt from the log): %s", self.path, exc)
            self.live_entries = []

    @property
    def path(self) -> Path:
        return self._file.path

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self.live_entries)

    def latest_epoch(self) -> int | None:
        with self._lock:
            return self.live_entries[-1].epoch if self.live_entries else None

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self.live_entries[0] if self.live_entries else None

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (#148); flushes if changed
        (``flush=False``: the caller calls ``flush`` before the append is acknowledged)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry "
                             f"(epoch {epoch}, start offset {start_offset})")
        with self._lock:
            changed = self._assign(epoch, start_offset)
            if changed and flush:
                self._flush()
            return changed

    def flush(self) -> None:
        """Write the checkpoint (tmp, fsync, rename) with the entries now in memory."""
        with self._lock:
            self._flush()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        last = self.live_entries[-1] if self.live_entries else None
        if last is not None and last.epoch == epoch and last.start_offset <= start_offset:
            return False  # the latest epoch at the same or a later start: nothing new
        entries = [e for e in self.live_entries
                   if e.epoch < epoch and e.start_offset < start_offset]
        entries.append(EpochEntry(epoch, start_offset))
        self.live_entries = entries  # (a new list, complete: see live_entries)
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, its end offset) as OffsetsForLeaderEpoch needs (#149)."""
        with self._lock:
            if epoch == UNDEFINED_EPOCH or not self.live_entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epoch == self.live_entries[-1].epoch:
                return epoch, log_end_offset
            if epoch > self.live_entries[-1].epoch:  # newer than any known epoch, as Kafka
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if epoch < self.live_entries[0].epoch:
                return epoch, self.live_entries[0].start_offset
            entries = self.live_entries
            floor = max((e for e in entries if e.epoch <= epoch), key=lambda e: e.epoch)
            nxt = min((e for e in entries if e.epoch > epoch), key=lambda e: e.epoch)
            return floor.epoch, nxt.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``."""
        with self._lock:
            found = None
            for e in self.live_entries:
                if e.start_offset <= offset:
                    found = e.epoch
            return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (#150)."""
        with self._lock:
            kept = [e for e in self.live_entries if e.start_offset < end_offset]
            if len(kept) != len(self.live_entries):
                self.live_entries = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries below ``start_offset``, re-adding the last one at it (#150)."""
        with self._lock:
            removed = [e for e in self.live_entries if e.start_offset <= start_offset]
            if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
                return
            kept = [e for e in self.live_entries if e.start_offset > start_offset]
            self.live_entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
            self._flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self.live_entries = []
            self._flush()

    def _flush(self) -> None:
        self._file.write(self.live_entries)

    def update_dir(self, dir: Path) -> None:
        self._file = CheckpointFile(Path(dir) / LEADER_EPOCH_CHECKPOINT_FILE, 0,
                                    _EpochFormatter())
