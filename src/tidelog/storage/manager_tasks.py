"""LogManager's startup loading and periodic tasks (Kafka's LogManager.loadLogs & co).

Kept apart from ``manager.py`` so that each stays small. ``LogManagerTasks`` is a mixin: it
works on the state ``LogManager`` owns (dirs, logs, clock, scheduler, config).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.config.core import LONG_MAX
from tidelog.config.log_config import LogConfig
from tidelog.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile, fsync_dir
from tidelog.storage.dir_lock import LOCK_FILE_NAME, LogDir, LogDirError
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.free_space import CHECK_INTERVAL_MS, FreeSpaceFloor
from tidelog.storage.log import Log
from tidelog.storage.manager_placement import LogsByDir
from tidelog.storage.remote import INDEX_CACHE_DIR_NAME as REMOTE_INDEX_CACHE_DIR
from tidelog.util.scheduler import ScheduledTask, TaskFn
from tidelog.util.topic_partition import TopicPartition, parse_topic_partition_name

if TYPE_CHECKING:
    from tidelog.storage.cleaner import LogCleaner
    from tidelog.storage.manager_config import LogManagerConfig
    from tidelog.util.clock import Clock
    from tidelog.util.scheduler import Scheduler

log = logging.getLogger(__name__)

_DELETE_DIR_RE = re.compile(r"\.[0-9a-f]{32}-delete$")
_OTHER_SUFFIX_RE = re.compile(r"\.[0-9a-f]{32}-(future|stray)$")
_PROGRESS_EVERY_S = 5.0


def first_segment_base(lg: Log) -> int | None:
    """Base offset of the log's oldest segment (None for a log without segments)."""
    base = lg.segments.first_segment_base_offset
    return None if base is None else int(base)


class _LoadProgress:
    """Logs loading progress of one dir: every 10 % and at least every 5 s."""

    def __init__(self, path: Path, total: int, clean: bool) -> None:
        self.path = path
        self.total = total
        self.clean = clean
        self.done = 0
        self.started = time.monotonic()
        self._last = self.started
        self._step = max(1, total // 10)
        self._lock = threading.Lock()

    def completed(self, lg: Log, seconds: float) -> None:
        with self._lock:
            self.done += 1
            now = time.monotonic()
            log.debug(
                "Completed load of log %s with log end offset %d in %.0f ms (%d/%d completed in %s)",
                lg.dir,
                lg.log_end_offset,
                seconds * 1000,
                self.done,
                self.total,
                self.path,
            )
            if self.done % self._step == 0 or now - self._last >= _PROGRESS_EVERY_S:
                self._last = now
                log.info(
                    "%s logs in %s: %d/%d (%.0f%%) after %.1f s",
                    "Loading" if self.clean else "Recovering",
                    self.path,
                    self.done,
                    self.total,
                    100 * self.done / self.total,
                    now - self.started,
                )


class _DirPlan:
    """What a log dir holds: partition dirs to load, ``-delete`` dirs to remove."""

    def __init__(self, d: LogDir) -> None:
        self.dir = d
        self.partitions: list[tuple[TopicPartition, Path]] = []
        self.deletes: list[Path] = []


class LogManagerTasks:
    """Loading and periodic work; mixed into LogManager."""

    # State owned by LogManager (declared for type checkers).
    dirs: list[LogDir]
    clock: Clock
    scheduler: Scheduler
    config: LogManagerConfig
    free_space: FreeSpaceFloor
    _lock: threading.RLock
    _logs: LogsByDir
    _shut_down: bool
    cleaner: LogCleaner | None

    def log_config(self, topic: str, overrides: Mapping[str, str] | None = None) -> LogConfig:
        raise NotImplementedError

    def _logs_in_dir(self, path: Path) -> list[Log]:
        raise NotImplementedError

    def all_logs(self) -> list[Log]:
        raise NotImplementedError

    def maybe_handle_io_error(self, where: Log | Path, exc: BaseException, op: str) -> bool:
        raise NotImplementedError

    def _init_tasks(self) -> None:
        self._tasks: list[ScheduledTask] = []
        self._delete_tasks: dict[Path, ScheduledTask] = {}
        self._pending_deletes: dict[Path, Log | None] = {}
        self._last_flush: dict[TopicPartition, int] = {}

    # -- loading -------------------------------------------------------------------------------
    def _scan_dir(self, d: LogDir) -> _DirPlan:
        plan = _DirPlan(d)
        for entry in sorted(os.scandir(d.path), key=lambda e: e.name):
            name = entry.name
            if not entry.is_dir() or name.startswith(".") or name == REMOTE_INDEX_CACHE_DIR:
                continue  # Kafka's LogManager skips the remote index cache too
            path = d.path / name
            if _DELETE_DIR_RE.search(name):
                plan.deletes.append(path)
            elif _OTHER_SUFFIX_RE.search(name) or name == "lost+found":
                log.warning("Ignoring directory %s (future/stray replicas are not supported)", path)
            else:
                try:
                    tp = parse_topic_partition_name(name)
                except ValueError:
                    raise LogDirError(
                        f"Found directory {path}, '{name}' is not in the form of "
                        "topic-partition or topic-partition.uniqueId-delete (if marked for "
                        "deletion). A directory that does not hold topic data should not "
                        "be in a log directory."
                    ) from None
                plan.partitions.append((tp, path))
        return plan

    def _scan_all(self) -> list[_DirPlan]:
        """Scan every live dir; the same partition in two dirs is a startup error."""
        plans = [self._scan_dir(d) for d in self.dirs if d.online]
        seen: dict[TopicPartition, Path] = {}
        for plan in plans:
            for tp, path in plan.partitions:
                if tp in seen:
                    raise LogDirError(
                        f"Duplicate log directories for {tp} are found in both {seen[tp]} and "
                        f"{path}. It is likely because log directory failure happened while "
                        "the broker was replacing the current replica with a future replica. "
                        "Remove one of them and restart."
                    )
                seen[tp] = path
        return plans

    def _read_offsets(self, cp: OffsetCheckpointFile, fallback: str) -> dict[TopicPartition, int]:
        """A checkpoint's offsets; unreadable means derived again (Kafka warns and goes on)."""
        try:
            return cp.read()
        except CorruptCheckpointError as exc:
            log.warning("%s; resetting %s", exc, fallback)
            return {}

    def _load_logs(self) -> None:
        """Load every partition of every live dir, dirs in parallel, N threads per dir."""
        started = time.monotonic()
        plans = self._scan_all()
        jobs: list[tuple[_DirPlan, ThreadPoolExecutor, list[Future[None]]]] = []
        try:
            for plan in plans:
                jobs.append(self._submit_dir(plan))
            self._await_dirs(jobs)
        finally:
            for _, pool, _ in jobs:
                pool.shutdown(wait=True, cancel_futures=True)
        log.info(
            "Loaded %d logs from %d dirs in %.0f ms",
            len(self._logs),
            len(plans),
            (time.monotonic() - started) * 1000,
        )

    def _submit_dir(
        self, plan: _DirPlan
    ) -> tuple[_DirPlan, ThreadPoolExecutor, list[Future[None]]]:
        d = plan.dir
        # The marker goes before loading starts: a crash while loading must count as unclean.
        clean = d.clean_shutdown_file.exists()
        if clean:
            d.clean_shutdown_file.delete()
        rps = self._read_offsets(
            d.recovery_point_checkpoint, "the recovery points to 0 (full recovery)"
        )
        lsos = self._read_offsets(
            d.log_start_offset_checkpoint,
            "the log start offsets to the base offset of each log's first segment",
        )
        # no logs and no clean-shutdown file: a new dir, not one a crash left behind
        state = "clean shutdown" if clean else "unclean shutdown" if plan.partitions else "new"
        log.info(
            "Loading %d logs in %s (%s, %d recovery threads)",
            len(plan.partitions),
            d.path,
            state if plan.partitions or clean else "a new log dir",
            self.config.num_recovery_threads_per_data_dir,
        )
        progress = _LoadProgress(d.path, len(plan.partitions), clean)
        pool = ThreadPoolExecutor(
            self.config.num_recovery_threads_per_data_dir,
            thread_name_prefix=f"log-recovery-{d.path.name}",
        )
        futures = [
            pool.submit(self._load_log, tp, path, clean, rps.get(tp, 0), lsos.get(tp, 0), progress)
            for tp, path in plan.partitions
        ]
        return plan, pool, futures

    def _await_dirs(
        self, jobs: list[tuple[_DirPlan, ThreadPoolExecutor, list[Future[None]]]]
    ) -> None:
        first_error: BaseException | None = None
        for plan, _, futures in jobs:
            failed = False
            for fut in futures:
                exc = fut.exception()
                if exc is not None:
                    failed = True
                    first_error = first_error or exc
            plan.dir.loaded = not failed
        if first_error is not None:
            raise first_error
        for plan, _, _ in jobs:  # only once startup succeeds: a failed one schedules nothing
            for path in plan.deletes:
                tp = parse_topic_partition_name(path.name)
                delay = self.log_config(tp.topic).file_delete_delay_ms
                self._schedule_log_deletion(path, None, delay)

    def _load_log(
        self,
        tp: TopicPartition,
        path: Path,
        clean: bool,
        recovery_point: int,
        log_start_offset: int,
        progress: _LoadProgress,
    ) -> None:
        t0 = time.monotonic()
        try:
            lg = Log.open(
                path,
                self.log_config(tp.topic),
                clock=self.clock,
                scheduler=self.scheduler,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point,
                had_clean_shutdown=clean,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
        except Exception as exc:
            raise KafkaStorageError(f"Error loading log {path}: {exc}") from exc
        with self._lock:
            other = self._logs.get(tp)
            if other is not None:
                lg.close()
                raise LogDirError(f"Duplicate log directories for {tp}: {other.dir} and {path}")
            self._logs[tp] = lg
            self._last_flush[tp] = self.clock.milliseconds()
        progress.completed(lg, time.monotonic() - t0)

    # -- scheduling ----------------------------------------------------------------------------
    def _every(self, name: str, fn: TaskFn, delay_ms: int, period_ms: int) -> None:
        if period_ms <= 0 or period_ms >= LONG_MAX:
            log.info("Periodic task %s is disabled (period %d ms)", name, period_ms)
            return
        self._tasks.append(self.scheduler.schedule(name, fn, delay_ms, period_ms))

    def _schedule_tasks(self) -> None:
        c = self.config
        delay = c.initial_task_delay_ms
        self._every("kafka-log-retention", self.cleanup_logs, delay, c.retention_check_interval_ms)
        self._every("kafka-log-flusher", self.flush_dirty_logs, delay, c.flush_check_ms)
        self._every(
            "kafka-recovery-point-checkpoint",
            self.checkpoint_log_recovery_offsets,
            delay,
            c.flush_recovery_offset_checkpoint_ms,
        )
        self._every(
            "kafka-log-start-offset-checkpoint",
            self.checkpoint_log_start_offsets,
            delay,
            c.flush_start_offset_checkpoint_ms,
        )
        self._every("tidelog-free-space-check", self.check_free_space, 0, CHECK_INTERVAL_MS)
        if hasattr(Log, "remove_expired_producers"):  # the Log keeps producer state
            period = c.producer_id_expiration_check_interval_ms
            self._every(
                "PeriodicProducerExpirationCheck", self.remove_expired_producers, period, period
            )

    def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        with self._lock:
            for task in self._delete_tasks.values():
                task.cancel()  # the -delete dirs stay and are queued again at next startup
            self._delete_tasks.clear()
            pending = [lg for lg in self._pending_deletes.values() if lg is not None]
            self._pending_deletes.clear()
        for lg in pending:
            try:
                lg.close()
            except Exception:
                log.warning("Error closing deleted log %s", lg.dir, exc_info=True)

    # -- periodic tasks ------------------------------------------------------------------------
    def check_free_space(self) -> None:
        """Measure every dir's free space; while one is below its floor, run retention now
        (segments DeleteRecords or retention made deletable free space within a second,
        not at the next log.retention.check.interval.ms)."""
        self.free_space.measure_all()
        if self.free_space.degraded:
            self.cleanup_logs()

    def cleanup_logs(self) -> int:
        """Retention: delete old segments of every non-compacted log (see #140)."""
        if self._shut_down:
            return 0
        started = time.monotonic()
        total = 0
        cleaner_runs = self.cleaner is not None
        for lg in self.all_logs():
            cfg = lg.config
            # Kafka: compacted logs get their retention from the cleaner thread (#140), so
            # the two never race on one log. Without a cleaner, compact,delete logs still
            # need time/size retention here; compact-only logs never do.
            if cfg.compact and (cleaner_runs or not cfg.delete):
                continue
            try:
                total += lg.delete_old_segments()
            except Exception as exc:
                if not self.maybe_handle_io_error(lg, exc, f"deleting old segments of {lg.dir}"):
                    log.error("Error deleting old segments of %s", lg.dir, exc_info=True)
        log.debug(
            "Log cleanup completed. %d files deleted in %.3f s", total, time.monotonic() - started
        )
        return total

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is at least its flush.ms ago."""
        if self._shut_down:
            return
        now = self.clock.milliseconds()
        with self._lock:
            items = list(self._logs.items())
        for tp, lg in items:
            # The Log's own time counts flushes it did itself (flush.messages, roll).
            last = getattr(lg, "last_flush_time", None)
            if last is None:
                last = self._last_flush.get(tp, now)
            if now - last < lg.config.flush_ms:
                continue
            try:
                log.debug("Flushing %s (last flushed %d ms ago)", tp, now - last)
                lg.flush()
                self._last_flush[tp] = now
            except Exception as exc:
                # A failed fsync takes the dir offline: no later write may be acknowledged.
                if not self.maybe_handle_io_error(lg, exc, f"flushing {lg.dir}"):
                    log.error("Error flushing %s", lg.dir, exc_info=True)

    def checkpoint_log_recovery_offsets(self) -> None:
        for d in self.dirs:
            if d.online:
                self._checkpoint_recovery_points(d)

    def checkpoint_log_start_offsets(self) -> None:
        for d in self.dirs:
            if d.online:
                self._checkpoint_log_start_offsets(d, self._logs_in_dir(d.path))

    def remove_expired_producers(self) -> None:
        now = self.clock.milliseconds()
        for lg in self.all_logs():
            try:
                lg.remove_expired_producers(now)
            except Exception:
                log.error("Error expiring producer ids of %s", lg.dir, exc_info=True)

    # -- checkpoints ---------------------------------------------------------------------------
    def _checkpoint_recovery_points(self, d: LogDir) -> bool:
        logs = self._logs_in_dir(d.path)
        try:
            d.recovery_point_checkpoint.write(
                {lg.topic_partition: lg.recovery_point for lg in logs if lg.topic_partition}
            )
        except OSError as exc:
            if not self.maybe_handle_io_error(d.path, exc, "writing recovery point checkpoint"):
                log.error("Error writing the recovery point checkpoint in %s: %s", d.path, exc)
            return False
        return True

    def _checkpoint_log_start_offsets(self, d: LogDir, logs: list[Log]) -> bool:
        # Only offsets a restart could not re-derive: above the first segment's base (#82);
        # a tiered log's always (Kafka: its start is the remote one, below local segments).
        offsets = {}
        for lg in logs:
            lso, first, tp = lg.log_start_offset, first_segment_base(lg), lg.topic_partition
            if tp is not None and first is not None and (lso > first or lg.remote_log_enabled):
                offsets[tp] = lso
        try:
            d.log_start_offset_checkpoint.write(offsets)
        except OSError as exc:
            if not self.maybe_handle_io_error(d.path, exc, "writing log start offset checkpoint"):
                log.error("Error writing the log start offset checkpoint in %s: %s", d.path, exc)
            return False
        return True

    def _checkpoint_dir(self, d: LogDir, logs: list[Log]) -> bool:
        """Both checkpoints of one dir; False if either could not be written."""
        rp_ok = self._checkpoint_recovery_points(d)
        return self._checkpoint_log_start_offsets(d, logs) and rp_ok

    # -- delayed deletion ----------------------------------------------------------------------
    def _schedule_log_deletion(self, path: Path, lg: Log | None, delay_ms: int) -> None:
        with self._lock:
            self._pending_deletes[path] = lg
        # Scheduled outside our lock: a manual scheduler runs due tasks inside schedule(),
        # and those tasks take our lock from whichever thread advanced the clock.
        task = self.scheduler.schedule(
            f"kafka-delete-logs-{path.name}", lambda: self._delete_log_dir(path), delay_ms
        )
        with self._lock:
            if path in self._pending_deletes:  # not already run
                self._delete_tasks[path] = task

    def logs_pending_delete(self) -> list[Path]:
        with self._lock:
            return sorted(self._pending_deletes)

    def _delete_log_dir(self, path: Path) -> None:
        with self._lock:
            if path not in self._pending_deletes:
                return
            lg = self._pending_deletes.pop(path)
            self._delete_tasks.pop(path, None)
        try:
            if lg is not None:
                lg.delete()
            if path.exists():
                shutil.rmtree(path)
            fsync_dir(path.parent)
            log.info("Deleted log directory %s", path)
        except OSError:
            log.error("Error deleting log directory %s", path, exc_info=True)


__all__ = ["LOCK_FILE_NAME", "LogManagerTasks", "first_segment_base"]
