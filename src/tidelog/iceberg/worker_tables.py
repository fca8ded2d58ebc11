"""The broker's end of the translation worker process (``worker``): the table side of
translation as calls over its pipes, the process started on first use and started again after
it died.

A worker that dies (killed, out of memory) fails the calls in flight with
:class:`WorkerDied`: the flush commits nothing here, translation pauses as it does while the
catalog cannot be reached (the lag grows, producers go on), and the next flush starts a new
worker, which asks the table where each partition is: a commit the dead one left half done is
either in the table (its offsets say so) or not (its files are removed by the new worker's
``clean_pending``), so every record is in the table once."""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Mapping
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import cast

from tidelog.util.clock import SYSTEM_CLOCK, Clock

from . import worker
from .maintenance import Expired
from .schemas import SchemaSource
from .table_writer import FlushResult, PartitionRead, Position, TopicSettings

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a clean interpreter importing pyiceberg and pyarrow, on a busy host


class WorkerDied(Exception):
    """The translation worker process ended while a call was in flight (or failed to start)."""


class WorkerTables:
    in_process = False

    def __init__(self, values: Mapping[str, object], log_dir: Path, nice: int,
                 schemas: SchemaSource | None) -> None:
        self.values = dict(values)
        self.log_dir = log_dir
        self.nice = nice
        self.schemas = schemas
        self.namespace = str(values["iceberg.namespace"])
        self.starts = 0  # workers started (1 + restarts after deaths)
        self.deaths = 0  # workers that died under a call
        self.clock: Clock = SYSTEM_CLOCK  # the respawn backoff's (monotonic nanoseconds)
        self.failures = 0  # workers that died (or did not start) since the last good flush
        self.held_back = 0  # calls failed at once, a new worker not yet due
        self.fault: str | None = None  # a method the worker exits at (tests' fault hook)
        self._due_ns = 0  # the earliest monotonic time the next worker may start
        self._lock = threading.Lock()
        self._proc: BaseProcess | None = None
        self._conns: list[Connection] = []
        self._generation = 0
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker's process id (None: none running)."""
        proc = self._proc
        return proc.pid if proc is not None else None

    def start(self) -> None:
        """Start the worker and open the catalog in it now (the service's start: a catalog
        that cannot be opened fails the broker's start, as the thread's does)."""
        self._call(worker.FLUSH, "open", ())

    def where(self, settings: TopicSettings, epochs: dict[int, int]) -> Position:
        return cast(Position, self._call(worker.FLUSH, "where", (settings, epochs)))

    def write(self, settings: TopicSettings, reads: list[PartitionRead]) -> FlushResult:
        """The reads name where their batches are in the segment files; the files'
        descriptors go with the call, and the worker reads the batches itself (no copy of
        them in this process, no pickling, no pipe's worth at a time)."""
        index: dict[int, int] = {}  # a descriptor here -> its place in the hand-over
        heads = [PartitionRead(r.partition, r.start, r.end, r.epoch, r.new, ranges=[
            replace(g, fd=index.setdefault(g.fd, len(index))) for g in r.ranges])
            for r in reads]
        fds: list[int] = []
        try:  # held here until handed over (a segment closed meanwhile fails the flush only)
            fds.extend(os.dup(fd) for fd in index)
            result = cast(FlushResult, self._call(worker.FLUSH, "write",
                                                  (settings, heads, len(fds)), fds))
        finally:
            for fd in fds:
                os.close(fd)
        self.failures = 0  # a good flush: the next death is backed off from the start
        return result

    def maintain(self, settings: TopicSettings, now_ms: int, orphan_age_ms: int) -> Expired:
        return cast(Expired, self._call(worker.MAINTENANCE, "maintain",
                                        (settings, now_ms, orphan_age_ms)))

    def drop(self, name: str, dlq_name: str) -> None:
        self._call(worker.FLUSH, "drop", (name, dlq_name))

    def identifier(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def close(self) -> None:
        """Stop the worker: its pipes closed, it ends when its calls in flight are done."""
        with self._lock:
            self._closed = True
            proc, conns, self._proc, self._conns = self._proc, self._conns, None, []
        for conn in conns:
            conn.close()
        if proc is not None:
            proc.join(30)
            if proc.exitcode is None:
                proc.kill()
                proc.join()

    def _call(self, channel: int, method: str, args: tuple[object, ...],
              fds: list[int] | None = None) -> object:
        generation, conn = self._conn(channel)
        try:
            conn.send((method, args))
            if fds:
                worker.send_fds(conn, fds)
            while True:
                kind, value = conn.recv()
                if kind == "schema":
                    conn.send(self._schema(*cast(tuple[str, tuple[object, ...]], value)))
                    continue
                break
        except (EOFError, OSError) as exc:
            self._died(generation, f"{type(exc).__name__}: {exc}")
            raise WorkerDied(f"the translation worker ended during {method}") from exc
        except BaseException:  # the pipe is out of step: a new worker for the next call
            self._died(generation, "interrupted call")
            raise
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        return value

    def _schema(self, name: str, args: tuple[object, ...]) -> object:
        if self.schemas is None:
            return False if name == "may_lag" else None
        return getattr(self.schemas, name)(*args)

    def _conn(self, channel: int) -> tuple[int, Connection]:
        with self._lock:
            if self._closed:
                raise WorkerDied("translation is stopping")
            if self._proc is None:
                wait_ns = self._due_ns - self.clock.nanoseconds()
                if wait_ns > 0:
                    self.held_back += 1
                    raise WorkerDied(f"the translation worker ended {self.failures} times in a "
                                     f"row: the next starts after a backoff of "
                                     f"{respawn_backoff_s(self.failures):.0f} s")
                try:
                    self._spawn()
                except WorkerDied:
                    self._back_off()
                    raise
            return self._generation, self._conns[channel]

    def _back_off(self) -> None:
        """One more worker ended before a good flush (the lock held): the next may start
        after the backoff of that many failures."""
        self.failures += 1
        self._due_ns = (self.clock.nanoseconds()
                        + int(respawn_backoff_s(self.failures) * 1_000_000_000))

    def _spawn(self) -> None:
        """Start a worker (the lock held) and wait for it to say it is ready."""
        ctx = multiprocessing.get_context("spawn")
        pairs = [ctx.Pipe(duplex=True) for _ in (worker.FLUSH, worker.MAINTENANCE)]
        proc = ctx.Process(
            target=worker.main, name="iceberg-translation-worker", daemon=True,
            args=([child for _, child in pairs], self.values, str(self.log_dir), self.nice,
                  os.getpid(), self.schemas is not None, logging.getLogger().level,
                  self.fault))
        proc.start()
        for _, child in pairs:
            child.close()
        conns = [ours for ours, _ in pairs]
        self.starts += 1
        try:
            if not conns[worker.FLUSH].poll(START_TIMEOUT_S):
                raise WorkerDied("the translation worker did not start in time")
            kind, _ = conns[worker.FLUSH].recv()
        except BaseException as exc:
            _end(proc, conns)
            if isinstance(exc, (EOFError, OSError)):
                raise WorkerDied("the translation worker ended as it started") from exc
            raise
        if kind != "ready":
            _end(proc, conns)
            raise WorkerDied(f"the translation worker said {kind} as it started")
        self._proc, self._conns = proc, conns
        self._generation += 1
        log.info("Iceberg translation worker started (pid %s)", proc.pid)

    def _died(self, generation: int, why: str) -> None:
        """The worker of ``generation`` is gone (or out of step): ended and forgotten, so the
        next call starts another. A later generation's worker is left alone."""
        with self._lock:
            if generation != self._generation or self._proc is None:
                return
            proc, conns, self._proc, self._conns = self._proc, self._conns, None, []
            self.deaths += 1
            self._back_off()
            backoff = respawn_backoff_s(self.failures)
        log.warning("Iceberg translation worker (pid %s) ended (%s); translation pauses until "
                    "a new one starts, in %.0f s at the earliest", proc.pid, why, backoff)
        _end(proc, conns)


RESPAWN_BACKOFF_S = 1.0  # after the first death (Kafka's exponential backoffs: x2 each)
RESPAWN_BACKOFF_MAX_S = 30.0


def respawn_backoff_s(failures: int) -> float:
    """How long after the ``failures``-th worker in a row ended (or did not start) the next
    may start: 1 s, doubled for each further one, at most 30 s (a worker that dies at every
    flush is not started again and again back to back: each start imports pyiceberg and
    pyarrow, a second of CPU the produce path shares)."""
    if failures <= 0:
        return 0.0
    return min(RESPAWN_BACKOFF_MAX_S, RESPAWN_BACKOFF_S * 2.0 ** min(failures - 1, 32))


def _end(proc: BaseProcess, conns: list[Connection]) -> None:
    for conn in conns:
        conn.close()
    if proc.is_alive():
        proc.kill()
    proc.join()
