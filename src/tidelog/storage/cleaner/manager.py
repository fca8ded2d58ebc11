"""LogCleanerManager: which partitions to clean, their states and checkpoints (#127-#131).

Per partition a cleaning state: absent (idle), IN_PROGRESS, ABORTED (abort requested while in
progress), or PAUSED(n) (paused n times; cleaning resumes when every pause is resumed). A
partition whose cleaning failed is marked uncleanable (per log dir) and skipped until it is
gone. Each log dir has a ``cleaner-offset-checkpoint`` with the first dirty offset of every
compacted partition in it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.util.topic_partition import TopicPartition

from ..checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from .cleaner import LogCleaningAbortedError, LogToClean

if TYPE_CHECKING:
    from ..log import Log

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1


class CleaningState:
    IN_PROGRESS = "LogCleaningInProgress"
    ABORTED = "LogCleaningAborted"


@dataclass(frozen=True)
class Paused:
    count: int

    def __str__(self) -> str:
        return f"LogCleaningPaused({self.count})"


State = str | Paused


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def log_dir_of(lg: Log) -> Path:
    return Path(lg.dir).parent


def cleanable_offsets(lg: Log, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """[first dirty, first uncleanable) of a log (#127, #128)."""
    start = lg.log_start_offset
    checkpointed = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpointed < start:
        if not lg.config.delete:
            log.warning("Resetting first dirty offset of %s to log start offset %d since the "
                        "checkpointed offset %d is invalid.", lg.name, start, checkpointed)
        first_dirty, force = start, True
    elif checkpointed > lg.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger "
                    "than the log end offset %d. Resetting to the log start offset %d.",
                    lg.name, checkpointed, lg.log_end_offset, start)
        first_dirty, force = start, True
    else:
        first_dirty = checkpointed
    bounds = [lg.last_stable_offset, lg.segments.active_segment.base_offset]
    lag = max(lg.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in lg.segments.non_active_log_segments_from(first_dirty):
            if seg.largest_timestamp > now - lag:
                bounds.append(seg.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(bounds)), force)


def max_compaction_delay(lg: Log, first_dirty: int, now: int) -> int:
    """How long past max.compaction.lag.ms the earliest dirty segment is (0 if not)."""
    stamps = [s.first_batch_timestamp()
              for s in lg.segments.non_active_log_segments_from(first_dirty)]
    stamps = [t for t in stamps if 0 < t < LONG_MAX]
    earliest = min(stamps) if stamps else LONG_MAX
    clean_until = now - max(lg.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


class LogCleanerManager:
    def __init__(self, log_dirs: Iterable[Path],
                 logs_provider: Callable[[], Mapping[TopicPartition, Log]]) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._logs_provider = logs_provider
        self.checkpoints = {d: OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT_FILE)
                            for d in self.log_dirs}
        self.in_progress: dict[TopicPartition, State] = {}
        self.uncleanable: dict[Path, set[TopicPartition]] = {}
        self._lock = threading.RLock()
        self._paused_cond = threading.Condition(self._lock)
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run = 0

    @property
    def logs(self) -> Mapping[TopicPartition, Log]:
        return self._logs_provider()

    # -- checkpoints -------------------------------------------------------------------------
    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        with self._lock:
            for d, cp in self.checkpoints.items():
                try:
                    out.update(cp.read())
                except Exception:
                    log.warning("Failed to read cleaner checkpoint in %s", d, exc_info=True)
        return out

    def update_checkpoints(self, data_dir: Path,
                           update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        with self._lock:
            cp = self.checkpoints.get(Path(data_dir))
            if cp is None:
                return
            logs = self.logs
            current = {tp: o for tp, o in cp.read().items() if tp in logs}
            if remove is not None:
                current.pop(remove, None)
            if update is not None:
                current[update[0]] = update[1]
            cp.write(current)

    def maybe_truncate_checkpoint(self, data_dir: Path, tp: TopicPartition, offset: int) -> None:
        """After a truncation: the first dirty offset may not stay above the new end."""
        with self._lock:
            lg = self.logs.get(tp)
            cp = self.checkpoints.get(Path(data_dir))
            if lg is None or cp is None or not lg.config.compact:
                return
            existing = cp.read()
            if existing.get(tp, 0) > offset:
                existing[tp] = offset
                cp.write(existing)

    # -- choosing a log ----------------------------------------------------------------------
    def is_uncleanable(self, lg: Log, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self.uncleanable.get(log_dir_of(lg), set())

    def mark_partition_uncleanable(self, log_dir: Path, tp: TopicPartition) -> None:
        with self._lock:
            self.uncleanable.setdefault(Path(log_dir), set()).add(tp)

    def maintain_uncleanable_partitions(self) -> None:
        """Forget uncleanable partitions whose logs are gone."""
        with self._lock:
            logs = self.logs
            for parts in self.uncleanable.values():
                parts.intersection_update(logs.keys())

    def grab_filthiest_compacted_log(self, now: int) -> LogToClean | None:
        """The cleanable log with the highest dirty ratio, marked in progress (#130, #131)."""
        with self._lock:
            self.time_of_last_run = now
            last_clean = self.all_cleaner_checkpoints()
            candidates = []
            for tp, lg in self.logs.items():
                if not lg.config.compact or tp in self.in_progress or self.is_uncleanable(lg, tp):
                    continue
                ltc = self._log_to_clean(tp, lg, last_clean.get(tp), now)
                if ltc.total_bytes > 0:
                    candidates.append(ltc)
            self.dirtiest_log_cleanable_ratio = max(
                (c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [c for c in candidates
                         if (c.needs_compaction_now and c.cleanable_bytes > 0)
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self.in_progress[filthiest.topic_partition] = CleaningState.IN_PROGRESS
            return filthiest

    def _log_to_clean(self, tp: TopicPartition, lg: Log, last: int | None, now: int) -> LogToClean:
        try:
            offsets = cleanable_offsets(lg, last, now)
            if offsets.force_update_checkpoint:
                self.update_checkpoints(log_dir_of(lg), (tp, offsets.first_dirty_offset))
            delay = max_compaction_delay(lg, offsets.first_dirty_offset, now)
            return LogToClean(tp, lg, offsets.first_dirty_offset,
                              offsets.first_uncleanable_dirty_offset, delay > 0)
        except Exception as e:
            raise LogCleaningError(lg, tp, f"Failed to calculate log cleaning stats for "
                                           f"partition {tp}: {e}") from e

    def deletable_logs(self) -> dict[TopicPartition, Log]:
        """Compacted logs not busy: the cleaner thread runs their retention (#140)."""
        with self._lock:
            out = {tp: lg for tp, lg in self.logs.items()
                   if tp not in self.in_progress and lg.config.compact
                   and not self.is_uncleanable(lg, tp)}
            for tp in out:
                self.in_progress[tp] = CleaningState.IN_PROGRESS
            return out

    # -- states ------------------------------------------------------------------------------
    def done_cleaning(self, tp: TopicPartition, data_dir: Path, end_offset: int) -> None:
        with self._lock:
            state = self.in_progress.get(tp)
            if state == CleaningState.IN_PROGRESS:
                self.update_checkpoints(data_dir, (tp, end_offset))
                del self.in_progress[tp]
            elif state == CleaningState.ABORTED:
                self.in_progress[tp] = Paused(1)
                self._paused_cond.notify_all()
            else:
                raise RuntimeError(f"In-progress partition {tp} cannot be in {state} state.")

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self.in_progress.get(tp)
                if state == CleaningState.IN_PROGRESS:
                    del self.in_progress[tp]
                elif state == CleaningState.ABORTED:
                    self.in_progress[tp] = Paused(1)
                    self._paused_cond.notify_all()
                else:
                    raise RuntimeError(f"In-progress partition {tp} cannot be in {state} state.")

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` (e.g. its log is being deleted); returns once it stopped."""
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Pause ``tp``; if it is being cleaned, abort and wait until the cleaner let go."""
        with self._lock:
            state = self.in_progress.get(tp)
            if state is None:
                self.in_progress[tp] = Paused(1)
            elif state == CleaningState.IN_PROGRESS:
                self.in_progress[tp] = CleaningState.ABORTED
            elif isinstance(state, Paused):
                self.in_progress[tp] = Paused(state.count + 1)
            else:
                raise RuntimeError(f"Compaction for partition {tp} cannot be aborted and paused "
                                   f"since it is in {state} state.")
            if not self._paused_cond.wait_for(lambda: isinstance(self.in_progress.get(tp),
                                                                 Paused), timeout_s):
                raise TimeoutError(f"cleaning of {tp} did not stop in time")

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self.in_progress.get(tp)
                if not isinstance(state, Paused):
                    raise RuntimeError(f"Compaction for partition {tp} cannot be resumed since "
                                       f"it is in {state} state.")
                if state.count == 1:
                    del self.in_progress[tp]
                else:
                    self.in_progress[tp] = Paused(state.count - 1)

    def state_of(self, tp: TopicPartition) -> State | None:
        with self._lock:
            return self.in_progress.get(tp)

    def check_cleaning_aborted(self, tp: TopicPartition | None) -> None:
        with self._lock:
            if tp is not None and self.in_progress.get(tp) == CleaningState.ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted")


class LogCleaningError(Exception):
    """Cleaning of one log failed: its partition is marked uncleanable."""

    def __init__(self, lg: Log, tp: TopicPartition, message: str) -> None:
        super().__init__(message)
        self.log = lg
        self.topic_partition = tp
