"""Moving a partition between log dirs on one broker (Kafka's AlterReplicaLogDirs with its
ReplicaAlterLogDirsThread and LogManager.replaceCurrentWithFutureLog).

A move creates a *future* log ``<topic>-<p>.<uuid>-future`` in the target dir, copies the
current log's batches into it (offsets, epochs and producer state kept: follower appends)
until it has caught up, then swaps it in under the current log's lock, so no append lands
between the last copy and the swap:

1. the future log is flushed (it holds every batch the current one has);
2. the current dir is renamed ``<topic>-<p>.<uuid>-delete`` (removed after
   file.delete.delay.ms, like a deleted topic's);
3. the future dir is renamed ``<topic>-<p>`` and becomes the partition's log.

A crash at any point recovers to before or after the move, never between: the loader leaves
``-future`` dirs alone, and at startup ``resume`` finds them — with a current log the copy
goes on from the future log's end (its recovery dropped any torn batch); without one (a crash
between steps 2 and 3) the future log is complete and is promoted.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.util.topic_partition import (
    FUTURE_DIR_SUFFIX,
    TopicPartition,
    delete_dir_name,
    parse_topic_partition_name,
)

from .checkpoints import fsync_dir
from .log import Log
from .log_read import FetchIsolation

if TYPE_CHECKING:
    from .manager import LogManager

log = logging.getLogger(__name__)
_FUTURE_RE = re.compile(r"\.[0-9a-f]{32}-future$")
COPY_BYTES = 1 << 20  # one step's read, as a fetch of replica.fetch.max.bytes


class ReplicaAlterLogDirs:
    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.futures: dict[TopicPartition, Log] = {}

    def _open(self, path: Path, like: Log | None) -> Log:
        tp = parse_topic_partition_name(path.name)
        cfg = like.config if like is not None else self.manager.log_config(tp.topic)
        return Log.open(path, cfg, clock=self.manager.clock, scheduler=self.manager.scheduler)

    # -- startup ---------------------------------------------------------------------------
    def resume(self, exists: Callable[[TopicPartition], bool] = lambda tp: True) -> None:
        """Pick up the moves a crash interrupted (see the module doc); the future log of a
        partition that no longer ``exists`` (deleted before its move stopped) is removed."""
        for d in self.manager.live_log_dirs:
            for path in sorted(Path(d).iterdir()):
                if not (path.is_dir() and _FUTURE_RE.search(path.name)):
                    continue
                tp = parse_topic_partition_name(path.name)
                if not exists(tp):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                current = self.manager.get_log(tp)
                future = self._open(path, current)
                if current is None:
                    future.rename_dir(tp.dir_name)
                    fsync_dir(Path(d))
                    self.manager.adopt_log(tp, future)
                    log.info("Promoted the complete future log of %s in %s", tp, d)
                else:
                    self._pause_cleaning(tp)
                    self.futures[tp] = future
                    log.info("Resuming the move of %s to %s at offset %d", tp, d,
                             future.log_end_offset)

    # -- requests --------------------------------------------------------------------------
    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        current = self.manager.get_log(tp)
        return None if current is None else Path(current.dir).parent

    def alter(self, tp: TopicPartition, target: Path) -> None:
        """Start moving ``tp`` to ``target`` (no-op if it is there; moving back cancels)."""
        current = self.manager.get_log(tp)
        if current is None:
            raise KeyError(tp)
        existing = self.futures.get(tp)
        if existing is not None:
            if Path(existing.dir).parent == target:
                return
            self._cancel(tp)
        if Path(current.dir).parent == target:
            return
        path = target / delete_dir_name(tp, FUTURE_DIR_SUFFIX)
        self._pause_cleaning(tp)
        self.futures[tp] = self._open(path, current)
        fsync_dir(target)
        log.info("Moving %s from %s to %s", tp, Path(current.dir).parent, target)

    def _cancel(self, tp: TopicPartition) -> None:
        """Drop a move: its future log is removed, cleaning of the partition resumes."""
        future = self.futures.pop(tp, None)
        if future is None:
            return
        path = Path(future.dir)
        future.close()
        if _FUTURE_RE.search(path.name):
            shutil.rmtree(path, ignore_errors=True)
        self._resume_cleaning(tp)

    def fail(self, tp: TopicPartition) -> None:
        """A step raised (e.g. the partition was deleted meanwhile): the move is dropped."""
        self._cancel(tp)

    def _pause_cleaning(self, tp: TopicPartition) -> None:
        """Kafka pauses cleaning a partition that has a future log (the cleaner would
        rewrite segments being copied and take the log's lock around the swap)."""
        if self.manager.cleaner is not None:
            self.manager.cleaner.abort_and_pause_cleaning(tp)

    def _resume_cleaning(self, tp: TopicPartition) -> None:
        if self.manager.cleaner is not None:
            self.manager.cleaner.resume_cleaning([tp])

    # -- the copy ----------------------------------------------------------------------------
    def step(self, tp: TopicPartition, max_bytes: int = COPY_BYTES) -> bool:
        """Copy one chunk into the future log, or swap it in once caught up (True)."""
        current = self.manager.get_log(tp)
        future = self.futures.get(tp)
        if future is None:
            return True
        if current is None:  # the partition was deleted meanwhile: so is its future copy
            self._cancel(tp)
            return True
        with current.lock:
            start = future.log_end_offset
            if start < current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
                start = current.log_start_offset
            if start >= current.log_end_offset:
                self._swap(tp, current, future)
                return True
            info = current.read(start, max_bytes, FetchIsolation.LOG_END, True)
            data = info.records.read() if info.records.size else b""
        if data:
            future.append_as_follower(data)
        return False

    def _swap(self, tp: TopicPartition, current: Log, future: Log) -> None:
        """Under the current log's lock: steps 1-3 of the module doc."""
        future.maybe_increment_log_start_offset(current.log_start_offset, "replica move")
        future.update_high_watermark(current.high_watermark)
        future.flush()
        self.manager.replace_current_with_future(tp, current, future)
        del self.futures[tp]
        self._resume_cleaning(tp)
        log.info("Moved %s to %s", tp, Path(future.dir).parent)

    def pending(self) -> list[TopicPartition]:
        return list(self.futures)

    def close(self) -> None:
        for tp in list(self.futures):
            self.futures.pop(tp).close()
