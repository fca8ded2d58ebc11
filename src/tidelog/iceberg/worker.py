"""The translation worker process (``iceberg.translation.process``): the table side of
translation (``LocalTables``: decode, Arrow, Parquet, the pyiceberg commits, maintenance) in
an interpreter of its own, so that the broker's event loop never waits for the interpreter
lock a flush holds. The broker keeps the log side (``translator``): which partitions it leads,
their last stable offsets, where their committed batches are, retention floors, lag.

It talks to the broker over two pipes, one per broker thread that calls it (flushes;
maintenance), each served here by a thread of its own. A request is ``(method, args)`` (for
``write``, where the partitions' batches are in the segment files (``file_ranges``), with the
files' descriptors after it (SCM_RIGHTS): the worker reads the batches itself, and their bytes
never pass through the broker's process or the pipe); the answer is ``("ok", value)`` or
``("error", exception)``. While a flush decodes, the worker asks the broker for the Schema
Registry's schemas it has not seen (``("schema", (name, args))``, answered on the same pipe):
the registry stays the broker's, read as the translation thread reads it.

The process is started clean ("spawn": never a fork of a process running an event loop and
threads), lowers its own priority by ``iceberg.translation.nice`` (the whole process: every
thread it starts inherits it), and dies with the broker: PR_SET_PDEATHSIG on Linux, and a
pipe at end-of-file anywhere."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.schema_registry.records import Reference, SchemaValue

from .file_ranges import read_ranges
from .heap import keep_freed_heap

if TYPE_CHECKING:
    from tidelog.schema_registry.schema_types import ParsedSchema

    from .table_writer import LocalTables, PartitionRead

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h
FLUSH, MAINTENANCE = 0, 1  # the pipes, by the broker thread that calls
FAULT_EXIT = 70  # the exit status of a worker ended by its fault hook (EX_SOFTWARE)


class RemoteError(Exception):
    """An exception of the worker that could not be sent as itself."""


class RemoteSchemas:
    """The broker's Schema Registry as the worker's SchemaSource: each lookup a question on
    the flush pipe (decoding runs on the thread that serves it); schemas parsed here."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _ask(self, name: str, *args: object) -> object:
        self._conn.send(("schema", (name, args)))
        return self._conn.recv()

    def by_id(self, schema_id: int) -> SchemaValue | None:
        found = self._ask("by_id", schema_id)
        return found if isinstance(found, SchemaValue) else None

    def may_lag(self, schema_id: int) -> bool:
        return bool(self._ask("may_lag", schema_id))

    def latest(self, subject: str) -> SchemaValue | None:
        found = self._ask("latest", subject)
        return found if isinstance(found, SchemaValue) else None

    def version(self, subject: str, version: int) -> SchemaValue | None:
        found = self._ask("version", subject, version)
        return found if isinstance(found, SchemaValue) else None

    def parse(self, value: SchemaValue) -> ParsedSchema:
        from tidelog.schema_registry import avro_type, json_type, protobuf_type  # noqa: F401
        from tidelog.schema_registry.schema_types import InvalidSchema, parse_schema

        def resolve(ref: Reference) -> SchemaValue:
            found = self.version(ref.subject, ref.version)
            if found is None:
                raise InvalidSchema(f"no schema reference found for subject {ref.subject} "
                                    f"and version {ref.version}")
            return found

        return parse_schema(value.schema_type, value.schema, value.references, resolve)


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when the broker's process ends (Linux), and end now if it
    already has."""
    if sys.platform == "linux":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError) as exc:  # the pipes' end-of-file still ends it
            log.warning("no parent-death signal for the translation worker: %s", exc)
    if os.getppid() != parent_pid:
        os._exit(0)


def lower_priority(increment: int) -> int:
    """Raise this process's nice value by ``increment`` (at most 19) before it starts any
    thread (on Linux the value is per thread, and threads inherit their creator's); the
    value it has now."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if increment > 0:
        nice = min(19, nice + increment)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError as exc:  # a seccomp profile may refuse it: translation runs as it is
            log.warning("could not lower the translation worker's priority: %s", exc)
    return os.getpriority(os.PRIO_PROCESS, 0)


def main(conns: list[Connection], values: Mapping[str, object], log_dir: str, nice: int,
         parent_pid: int, with_schemas: bool, log_level: int, fault: str | None = None
         ) -> None:
    """The worker's life: say ready, serve both pipes until the broker closes them (or
    dies). The catalog is opened by the first call that needs it (and again by the next one
    while it cannot be: a catalog outage fails the calls, not the worker)."""
    die_with_parent(parent_pid)
    lower_priority(nice)
    keep_freed_heap()
    logging.basicConfig(level=log_level,
                        format="%(asctime)s %(levelname)s [iceberg worker] %(name)s: "
                               "%(message)s")
    side = Side(values, Path(log_dir), RemoteSchemas(conns[FLUSH]) if with_schemas else None,
                fault)
    conns[FLUSH].send(("ready", os.getpid()))
    threading.Thread(target=serve, args=(conns[MAINTENANCE], side),
                     name="iceberg-maintenance", daemon=True).start()
    serve(conns[FLUSH], side)


class Side:
    """The worker's table side, opened on first use."""

    def __init__(self, values: Mapping[str, object], log_dir: Path,
                 schemas: RemoteSchemas | None, fault: str | None = None) -> None:
        self.values = values
        self.log_dir = log_dir
        self.schemas = schemas
        self.fault = fault  # a method whose call ends the process at once (a fault hook)
        self._lock = threading.Lock()
        self._side: LocalTables | None = None

    def open(self) -> LocalTables:
        with self._lock:
            if self._side is None:
                self._side = open_side(self.values, self.log_dir, self.schemas)
            return self._side

    def call(self, method: str, args: tuple[object, ...]) -> object:
        if method == self.fault:
            os._exit(FAULT_EXIT)
        side = self.open()
        return None if method == "open" else getattr(side, method)(*args)


def open_side(values: Mapping[str, object], log_dir: Path,
              schemas: RemoteSchemas | None) -> LocalTables:
    from .catalog import ICEBERG_DIR, open_catalog
    from .schemas import Codecs
    from .table_writer import LocalTables
    from .tables import Tables

    tables = Tables(open_catalog(values, log_dir), str(values["iceberg.namespace"]),
                    log_dir / ICEBERG_DIR / "pending")
    removed = tables.clean_pending()
    if removed:
        log.info("removed %d files of Iceberg commits a crash interrupted", removed)
    return LocalTables(tables, Codecs(schemas))


def serve(conn: Connection, side: Side) -> None:
    """Answer the broker's requests on ``conn`` one at a time; the process ends when the
    broker closes it (or dies: the pipe is then at end-of-file)."""
    while True:
        try:
            method, args = conn.recv()
            # write: (settings, reads, descriptors), then the segment files' descriptors
            fds = recv_fds(conn, args[2]) if method == "write" else []
        except (EOFError, OSError):
            os._exit(0)
        try:
            if method == "write":
                args = (args[0], with_data(args[1], fds))
            answer: tuple[str, object] = ("ok", side.call(method, args))
        except Exception as exc:
            answer = ("error", sendable(exc))
        finally:
            for fd in fds:
                os.close(fd)
        try:
            conn.send(answer)
        except (EOFError, OSError):
            os._exit(0)


MAX_FDS = 200  # descriptors a message (the kernel's SCM_MAX_FD is 253)


def send_fds(conn: Connection, fds: list[int]) -> None:
    """Hand ``fds`` to the other end of ``conn`` (duplicated into it by the kernel)."""
    with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as s:
        for i in range(0, len(fds), MAX_FDS):
            socket.send_fds(s, [b"f"], fds[i:i + MAX_FDS])


def recv_fds(conn: Connection, count: int) -> list[int]:
    """The ``count`` descriptors ``send_fds`` handed over on ``conn``."""
    out: list[int] = []
    with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as s:
        while len(out) < count:
            msg, fds, _, _ = socket.recv_fds(s, 1, min(MAX_FDS, count - len(out)))
            out.extend(fds)
            if not msg:
                raise EOFError("the broker ended during a hand-over of descriptors")
    return out


def with_data(reads: list[PartitionRead], fds: list[int]) -> list[PartitionRead]:
    """The reads with their bytes, read from their ranges (whose ``fd`` is an index into
    ``fds``, the segment files handed over with the call)."""
    for r in reads:
        r.data = read_ranges([replace(g, fd=fds[g.fd]) for g in r.ranges])
        r.ranges = []
    return reads


def sendable(exc: Exception) -> Exception:
    """``exc`` if it survives a pickle round trip, else a RemoteError naming it."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RemoteError(f"{type(exc).__name__}: {exc}")
    return exc
