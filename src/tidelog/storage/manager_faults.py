"""The LogManager's side of log dir failures (Kafka's LogManager.handleLogDirFailure and
ReplicaManager.handleLogDirFailure): a disk error reported through the LogDirFailureChannel
takes its dir offline once; its logs are closed without flushing and their partitions stay
known as offline. Also the removal of logs a failed request created. Mixed into LogManager."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from tidelog.storage.checkpoints import fsync_dir
from tidelog.storage.dir_lock import LogDir
from tidelog.storage.free_space import FreeSpaceFloor
from tidelog.storage.log import Log
from tidelog.storage.log_dir_failure import LogDirFailureChannel, is_disk_failure
from tidelog.storage.manager_placement import LogsByDir
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger("tidelog.storage.manager")


class LogManagerFaults:
    """Offline dirs and abandoned logs; mixed into LogManager."""

    # State owned by LogManager (declared for type checkers).
    dirs: list[LogDir]
    failure_channel: LogDirFailureChannel
    _lock: threading.RLock
    _logs: LogsByDir
    _last_flush: dict[TopicPartition, int]
    _offline_logs: dict[TopicPartition, Path]
    _all_dirs_offline_listeners: list[Callable[[], object]]
    free_space: FreeSpaceFloor

    def add_all_dirs_offline_listener(self, fn: Callable[[], object]) -> None:
        """``fn`` runs once when the last live dir fails (the broker then shuts down)."""
        self._all_dirs_offline_listeners.append(fn)

    def maybe_handle_io_error(self, where: Log | Path, exc: BaseException, op: str) -> bool:
        """Report ``exc`` if it is a disk error in ``where``'s log dir; True if it was."""
        if not is_disk_failure(exc):
            return False
        path = Path(where.dir).parent if isinstance(where, Log) else Path(where)
        d = next((d for d in self.dirs if d.path == path), None)
        if d is None:
            return False
        self.failure_channel.maybe_add_offline_log_dir(d.path, f"Error while {op}", exc)
        return True

    def offline_partition_dir(self, tp: TopicPartition) -> Path | None:
        """The offline log dir holding ``tp``, or None if ``tp`` is not offline."""
        return self._offline_logs.get(tp)

    def offline_partitions(self) -> dict[TopicPartition, Path]:
        with self._lock:
            return dict(self._offline_logs)

    def _handle_log_dir_failure(self, path: Path) -> None:
        """Take ``path`` offline: no write reaches it again (its logs' files are closed
        without flushing, its lock is released), its partitions stay known as offline."""
        d = next((d for d in self.dirs if d.path == path), None)
        if d is None or not d.online:
            return
        d.offline_reason = self.failure_channel.offline_reason(path) or "I/O error"
        self.free_space.remove_dir(path)
        with self._lock:
            failed = {tp: lg for tp, lg in self._logs.items() if Path(lg.dir).parent == path}
            for tp in failed:
                del self._logs[tp]
                self._last_flush.pop(tp, None)
                self._offline_logs[tp] = path
        for lg in failed.values():
            try:
                lg.close_handlers()
            except Exception as exc:  # the disk is gone: closing may fail too, say it once
                log.debug("closing %s after its dir failed: %s", lg.dir, exc)
        if d.lock is not None:
            try:
                d.lock.release()
            except OSError:
                pass
            d.lock = None
        names = sorted(str(tp) for tp in failed)
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        log.warning("%d partitions are offline (log dir %s failed): %s", len(names), path, shown)
        if not any(x.online for x in self.dirs):
            log.error(
                "Shutdown broker because all log dirs in %s have failed",
                ", ".join(str(x.path) for x in self.dirs),
            )
            for fn in list(self._all_dirs_offline_listeners):
                fn()


    def abandon_logs(self, tps: Iterable[TopicPartition]) -> None:
        """Remove logs created moments ago for a request that failed (a CreateTopics that
        ran out of descriptors): at once, no ``-delete`` dir, no trace. All are closed first,
        which gives back the descriptors the removal itself needs."""
        with self._lock:
            logs = [lg for tp in tps if (lg := self._logs.pop(tp, None)) is not None]
            for tp in tps:
                self._last_flush.pop(tp, None)
        for lg in logs:
            lg.close_handlers()
        dirs = [Path(lg.dir) for lg in logs]
        # A partition whose creation failed half-way has a dir but no log (its own cleanup
        # may have lacked the descriptors that closing the others just gave back).
        with self._lock:
            dirs += [d.path / tp.dir_name for tp in tps for d in self.dirs
                     if tp not in self._logs and (d.path / tp.dir_name).is_dir()]
        for path in dirs:
            shutil.rmtree(path, ignore_errors=True)
        for parent in {path.parent for path in dirs}:
            try:
                fsync_dir(parent)
            except OSError as exc:
                self.maybe_handle_io_error(parent, exc, "removing abandoned logs")
        if dirs:
            log.info("Removed %d partition dirs of a failed request", len(dirs))


__all__ = ["LogManagerFaults"]
