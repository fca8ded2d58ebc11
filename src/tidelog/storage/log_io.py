"""``Log._io``: the log's lock held around an I/O operation, an OSError turned into
KafkaStorageError naming the log dir (Kafka's LogDirFailureChannel reports it so).

A class, not a ``contextlib.contextmanager`` generator, as every append enters one: the
generator, its wrapper and two resumptions cost about 4 us per append at 1,000 partitions."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from .errors import KafkaStorageError


class Drains(Protocol):
    """The log's writes in flight (log_writes.PendingWrites)."""

    def drain(self) -> None: ...


class Named(Protocol):
    """What an error names: the log's dir and partition."""

    @property
    def dir(self) -> Path: ...

    @property
    def name(self) -> str: ...


class LogIo:
    """Enter: ``lock`` (and, but for appends and flushes, the ``writes`` in flight drained)."""

    __slots__ = ("_lock", "_log", "_op", "_writes")

    def __init__(self, lock: threading.RLock, writes: Drains, op: str,
                 lg: Named) -> None:
        self._lock = lock
        self._writes = writes
        self._op = op
        self._log = lg

    def __enter__(self) -> None:
        self._lock.acquire()
        if self._op not in ("append-async", "flush"):
            try:
                self._writes.drain()  # roll, truncation, retention...: after the writes queued
            except BaseException:
                self._lock.release()
                raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        self._lock.release()
        if isinstance(exc, OSError):
            lg = self._log
            raise KafkaStorageError(
                f"Error while {self._op} in dir {lg.dir} ({lg.name}): {exc}") from exc
