"""Log dir failure handling (Kafka's LogDirFailureChannel).

Any I/O error in a log dir (write, fsync, rename, checkpoint) is reported here. The first
report of a dir marks it offline and logs one ERROR line naming the dir and the cause; the
listeners (the LogManager) then close the dir's logs so nothing more is written to it. This
matters after a failed fsync: the kernel may have dropped the dirty pages, and a later fsync
that succeeds would acknowledge data that never reached the disk ("fsyncgate"). Later
reports and refused requests for an offline dir are only counted, never logged again, so a
dead disk costs one line in the log, not a traceback per request.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# Errors of the process rather than of the disk: running out of descriptors or memory is
# not a reason to take a healthy dir offline (the request fails, the dir keeps serving).
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def io_cause(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, or its ``__cause__`` chain), else None."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__
    return None


def is_disk_failure(exc: BaseException) -> bool:
    cause = io_cause(exc)
    return cause is not None and cause.errno not in RESOURCE_ERRNOS


class LogDirFailureChannel:
    """Which log dirs are offline, why, and how often they were hit since."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, str] = {}
        self._repeats: dict[Path, int] = {}
        self._listeners: list[Callable[[Path], object]] = []

    def add_listener(self, fn: Callable[[Path], object]) -> None:
        self._listeners.append(fn)

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        return Path(log_dir) in self._offline

    def offline_reason(self, log_dir: Path) -> str | None:
        return self._offline.get(Path(log_dir))

    def offline_log_dirs(self) -> dict[Path, str]:
        with self._lock:
            return dict(self._offline)

    def maybe_add_offline_log_dir(
        self, log_dir: Path, msg: str, exc: BaseException | None = None
    ) -> bool:
        """Mark ``log_dir`` offline; True the first time (then the listeners run)."""
        path = Path(log_dir)
        cause = io_cause(exc) if exc is not None else None
        reason = msg if cause is None else f"{msg}: {cause}"
        with self._lock:
            if path in self._offline:
                self._repeats[path] = self._repeats.get(path, 0) + 1
                return False
            self._offline[path] = reason
            self._repeats[path] = 0
        # One line, no traceback: the cause names the errno and the file.
        log.error("Log directory %s is offline: %s", path, reason)
        for fn in list(self._listeners):
            try:
                fn(path)
            except Exception:
                log.exception("Error handling the failure of log directory %s", path)
        return True

    def count_refused(self, log_dir: Path) -> None:
        """A request refused because ``log_dir`` is offline (counted, not logged)."""
        path = Path(log_dir)
        with self._lock:
            self._repeats[path] = self._repeats.get(path, 0) + 1

    def repeat_count(self, log_dir: Path) -> int:
        return self._repeats.get(Path(log_dir), 0)

    def summary(self) -> list[str]:
        """One line per offline dir with its repeat count (logged at shutdown)."""
        with self._lock:
            return [
                f"{p} offline ({reason}); {self._repeats.get(p, 0)} later failures/refusals"
                for p, reason in self._offline.items()
            ]


__all__ = ["RESOURCE_ERRNOS", "LogDirFailureChannel", "io_cause", "is_disk_failure"]
