"""The free-space floor of the log dirs (``log.dir.min.free.bytes``), beyond Kafka.

Kafka lets a log dir fill up: the append that meets ENOSPC takes the dir offline and, with no
dir left, the broker halts; every client is cut off, readers included, until someone frees
space and restarts it. Here each log dir has a floor: an append that would leave less free
space than the floor is refused with ``LogDirBelowFloorError`` (a retriable error on the wire,
see below) while the broker keeps serving everything else: fetches, offsets, metadata,
retention, DeleteRecords, topic deletion and compaction. Writes resume by themselves, at the
first append after space came back (retention, a deleted topic, a grown file system). A real
ENOSPC or EIO still takes the dir offline, as Kafka does.

* Floor: ``log.dir.min.free.bytes``; unset, the smaller of 1 GiB and 5% of the dir's file
  system; 0 turns the floor off.
* Reserve: coordinator writes (group offsets and metadata in ``__consumer_offsets``,
  ``__transaction_state``, transaction markers) may go on until half the floor is left, so
  consumers still commit and transactions still complete while client produces are refused.
* Cost: free space is measured (``statvfs``) when a dir is added, by a periodic task, and at
  an append only once the bytes appended since the last measure could have brought the dir
  within twice its floor; above that an append costs a comparison and a subtraction.
* Wire error: NOT_ENOUGH_REPLICAS (19), the error Kafka answers when a write cannot be made
  durable right now on an otherwise healthy partition. librdkafka retries it without a
  metadata refresh (RETRY, MSG_NOT_PERSISTED: an idempotent producer keeps its sequence and
  loses nothing), kafka-python's NotEnoughReplicasError is a RetriableError and aiokafka's is
  ``retriable``; each retries until its own delivery timeout (librdkafka
  ``message.timeout.ms`` 300 s, kafka-python ``delivery_timeout_ms`` 120 s, aiokafka
  ``request_timeout_ms`` 40 s, never for an idempotent one), not a retry count, so a producer rides out a degraded dir for as
  long as it was told to wait. KAFKA_STORAGE_ERROR, the other candidate, means an offline dir
  (operator action needed) and makes all three invalidate their metadata on every retry.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.errors import StorageError

log = logging.getLogger(__name__)

MIN_FREE_BYTES = "log.dir.min.free.bytes"
DEFAULT_FLOOR_CAP = 1 << 30  # 1 GiB
DEFAULT_FLOOR_RATIO = 0.05  # of the file system's size
COORDINATOR_SHARE = 0.5  # coordinator writes may use this share of the floor
CHECK_INTERVAL_MS = 1000
UNLIMITED = 1 << 62  # the headroom of a dir without a floor  # the periodic measure (and, while degraded, retention)

JUST_BELOW_FLOOR = -1  # an override's "below the floor, above the coordinators' reserve"
FreeBytesProbe = Callable[[Path], tuple[int, int]]  # path -> (free bytes, total bytes)


class LogDirBelowFloorError(StorageError):
    """An append refused because its log dir is below ``log.dir.min.free.bytes``."""

    kafka_error = "NOT_ENOUGH_REPLICAS"


def statvfs_probe(path: Path) -> tuple[int, int]:
    """(bytes an unprivileged writer may still use, the file system's size)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def default_floor(total_bytes: int) -> int:
    return min(DEFAULT_FLOOR_CAP, int(total_bytes * DEFAULT_FLOOR_RATIO))


@dataclass
class DirSpace:
    """One log dir's last measure."""

    path: Path
    floor: int
    free: int
    total: int
    below_floor: bool = False
    refused: int = 0  # the largest append refused while below the floor
    # bytes that may still be appended without a measure: what the last measure left above
    # twice the floor, less what was appended since (0 below it: every append measures)
    headroom: int = 0


class FreeSpaceFloor:
    """The floor of every online log dir; ``check_append`` is called by each leader append."""

    def __init__(self, configured: int | None, probe: FreeBytesProbe = statvfs_probe) -> None:
        self.configured = configured
        self.probe = probe
        self._override: Callable[[Path], int | None] | None = None
        # by the dir's path as a str: an append's lookup hashes it in C (a Path's __hash__ is
        # a Python call)
        self._dirs: dict[str, DirSpace] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[DirSpace], object]] = []

    @property
    def override(self) -> Callable[[Path], int | None] | None:
        """A test's fault plan: the free bytes it reports for a dir it filled
        (JUST_BELOW_FLOOR: one byte under the floor), None for the dirs whose free space is
        measured. While one is set every append measures (no headroom is counted down)."""
        return self._override

    @override.setter
    def override(self, fn: Callable[[Path], int | None] | None) -> None:
        with self._lock:
            self._override = fn
            if fn is not None:
                for d in self._dirs.values():
                    d.headroom = 0

    def space(self, key: str) -> DirSpace | None:
        """The dir of ``key`` (``dir_key``) whose ``headroom`` an append may count down
        itself (``check_append``'s first case, inline in ``Log.append_plain_as_leader``):
        when the size is below it, nothing else is checked."""
        with self._lock:
            return self._dirs.get(key)

    def add_listener(self, fn: Callable[[DirSpace], object]) -> None:
        """``fn(space)`` runs when a dir crosses its floor, either way."""
        self._listeners.append(fn)

    def add_dir(self, path: Path) -> None:
        with self._lock:
            self._dirs[os.fspath(path)] = DirSpace(path, 0, 0, 0)
        space = self.measure(path)
        if space is not None:
            log.info("Log dir %s: %d bytes free, %s %d%s", path, space.free, MIN_FREE_BYTES,
                     space.floor, " (off)" if space.floor == 0 else "")

    @staticmethod
    def dir_key(path: Path) -> str:
        """What ``check_append`` finds ``path``'s dir by (computed once per log)."""
        return os.fspath(path)

    def remove_dir(self, path: Path) -> None:
        """An offline dir: nothing is appended to it any more."""
        with self._lock:
            self._dirs.pop(os.fspath(path), None)

    def snapshot(self) -> list[DirSpace]:
        with self._lock:
            return [DirSpace(**vars(d)) for d in self._dirs.values()]

    @property
    def degraded(self) -> bool:
        with self._lock:
            return any(d.below_floor for d in self._dirs.values())

    def measure(self, path: Path) -> DirSpace | None:
        try:
            free, total = self.probe(path)
        except OSError as exc:  # a dir failing for real is the failure channel's business
            log.debug("cannot measure the free space of %s: %s", path, exc)
            return None
        override = self._override(path) if self._override is not None else None
        floor = self.configured if self.configured is not None else default_floor(total)
        if override is not None:
            free = max(0, floor - 1) if override == JUST_BELOW_FLOOR else override
        with self._lock:
            d = self._dirs.get(os.fspath(path))
            if d is None:
                return None
            d.free, d.total, d.floor = free, total, floor
            # degraded below the floor, and until the append it refused would fit again
            below = floor > 0 and (free < floor or (d.below_floor and free - d.refused < floor))
            crossed = self._set_below(d, below)
            d.headroom = UNLIMITED if floor == 0 else 0 if below or self._override is not None \
                else max(0, free - 2 * floor)
            space = DirSpace(**vars(d))
        if crossed:
            self._crossed(space)
        return space

    def measure_all(self) -> None:
        with self._lock:
            paths = [d.path for d in self._dirs.values()]
        for path in paths:
            self.measure(path)

    def check_append(self, key: str, size: int, coordinator: bool) -> None:
        """Count ``size`` bytes about to be appended to the dir of ``key`` (``dir_key``);
        refuse them when they would leave less than the floor (half of it for a
        coordinator's write)."""
        d = self._dirs.get(key)
        if d is None or self.configured == 0:
            return
        if size < d.headroom:  # far above the floor, no override (its headroom is 0): count it
            d.headroom -= size  # (no lock: a lost update only makes the next measure sooner
            return  # or later by one append; the periodic measure resets it)
        space = self.measure(d.path)
        if space is None or space.floor == 0:
            return
        limit = int(space.floor * (1 - COORDINATOR_SHARE)) if coordinator else space.floor
        # degraded, a client's append waits until the largest one refused fits (no flapping
        # between small appends that fit and large ones that do not)
        needed = size if coordinator or not space.below_floor else max(size, space.refused)
        refused = space.free - needed < limit
        with self._lock:
            d = self._dirs.get(key)
            if d is None:
                return
            if refused:
                d.refused = max(d.refused, size) if d.below_floor else size
            else:
                d.headroom = max(0, d.headroom - size)
            # a client's append decides the state: refused, degraded; taken, writable again
            crossed = not coordinator and self._set_below(d, refused)
            space = DirSpace(**vars(d))
        if crossed:
            self._crossed(space)
        if refused:
            raise LogDirBelowFloorError(
                f"Log dir {space.path} has {space.free} bytes free, below {MIN_FREE_BYTES} "
                f"({space.floor}) once this append is written: writes resume once space is freed"
            )

    @staticmethod
    def _set_below(d: DirSpace, below: bool) -> bool:
        """Set the state; True if it changed."""
        if below == d.below_floor:
            return False
        d.below_floor = below
        if not below:
            d.refused = 0
        return True

    def _crossed(self, space: DirSpace) -> None:
        if space.below_floor:
            log.warning(
                "Log dir %s is at its free-space floor %s (%d bytes free, floor %d): produce "
                "requests to its "
                "partitions are refused with NOT_ENOUGH_REPLICAS until space is freed; reads, "
                "commits, retention and deletion go on", space.path, MIN_FREE_BYTES,
                space.free, space.floor,
            )
        else:
            log.info("Log dir %s has room above %s again (%d bytes free, floor %d): writes resume",
                     space.path, MIN_FREE_BYTES, space.free, space.floor)
        for fn in list(self._listeners):
            fn(space)
