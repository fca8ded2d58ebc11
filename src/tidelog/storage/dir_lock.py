"""Log-dir preparation: create, de-duplicate, check access, and lock with ``.lock``; and
``LogDir``, one entry of ``log.dirs`` as the LogManager and its helpers hold it.

Kafka locks every log dir with an exclusive OS lock on ``<dir>/.lock`` so that a second broker
(or a second LogManager in the same process) pointed at the same directory fails at once,
before it reads or writes anything. ``fcntl.flock`` locks belong to the open file description,
so a second open in the same process conflicts too, and the OS drops the lock when the process
dies (kill -9 included), so a crashed broker never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from tidelog.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    CleanShutdownFile,
    OffsetCheckpointFile,
)
from tidelog.storage.errors import KafkaStorageError

log = logging.getLogger(__name__)

LOCK_FILE_NAME = ".lock"


class LogDirError(KafkaStorageError):
    """A log dir cannot be used (duplicate, unreadable, locked by someone else)."""


class LogDirLockedError(LogDirError):
    """Another process (or LogManager) holds the dir's ``.lock``."""


class FileLock:
    """An exclusive, non-blocking flock on one file; ``release()`` is idempotent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_lock(self) -> bool:
        # O_CREAT on an existing file changes nothing, so a failed attempt touches nothing.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        return True

    @property
    def locked(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None


def canonical_dirs(log_dirs: Iterable[Path | str]) -> list[Path]:
    """Absolute, symlink-resolved dirs; a dir listed twice is a config error (Kafka)."""
    seen: dict[Path, Path] = {}
    out: list[Path] = []
    for raw in log_dirs:
        canon = Path(raw).expanduser().resolve()
        if canon in seen:
            raise LogDirError(
                f"Duplicate log directory found: {raw} and {seen[canon]} are both {canon}"
            )
        seen[canon] = Path(raw)
        out.append(canon)
    if not out:
        raise LogDirError("No log directories configured (log.dirs is empty)")
    return out


def prepare_dir(path: Path) -> str | None:
    """Create ``path`` if missing and check it is a readable, writable directory.

    Returns None if usable, else the reason (the caller marks the dir offline).
    """
    try:
        if not path.exists():
            log.info("Log directory %s not found, creating it.", path)
            path.mkdir(parents=True)
        if not path.is_dir():
            return f"{path} is not a directory"
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            return f"{path} is not readable and writable"
    except OSError as exc:
        return f"cannot create or access {path}: {exc}"
    return None


def lock_dir(path: Path) -> FileLock:
    """Take ``<path>/.lock`` or raise LogDirLockedError naming the directory."""
    lock = FileLock(path / LOCK_FILE_NAME)
    if not lock.try_lock():
        raise LogDirLockedError(
            f"Failed to acquire lock on file {LOCK_FILE_NAME} in {path}. A tidelog (or Kafka) "
            f"instance in another process or thread is using this directory."
        )
    return lock


class LogDir:
    """One entry of ``log.dirs``: its lock, checkpoint files and loading state."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock: FileLock | None = None
        self.offline_reason: str | None = None
        self.loaded = False  # every log loaded: a clean-shutdown marker may be written
        self.recovery_point_checkpoint = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT_FILE)
        self.log_start_offset_checkpoint = OffsetCheckpointFile(
            path / LOG_START_OFFSET_CHECKPOINT_FILE
        )
        self.clean_shutdown_file = CleanShutdownFile(path)

    @property
    def online(self) -> bool:
        return self.offline_reason is None
