"""Iceberg topics at one broker: a translator per topic whose ``tidelog.iceberg.mode`` is not
``disabled``, flushed on one translation thread (never on the event loop) often enough that
a record is in the table within the topic's target lag (``tidelog.iceberg.target.lag.ms``,
else the broker's ``iceberg.target.lag.ms``; Redpanda's "commit all data produced to the
topic within the lag target"),
retention floors under the partitions it hosts, and the tables of deleted topics dropped
(``tidelog.iceberg.delete``).

The table side of the flushes (decode, Arrow, Parquet, the commits, maintenance) runs on
those threads too, or, with ``iceberg.translation.process``, in a translation worker process
(``worker``): the broker's threads then only read the log and wait for the worker, so that
the event loop never waits for an interpreter lock a flush holds.

A flush that fails (catalog or warehouse unreachable, the worker process died) commits
nothing: translation pauses, the lag grows, producers go on, and the next flush starts from
the table again (in a new worker process). A catalog that cannot be opened as the broker
starts is the same outage: the broker starts, and the flushes open it when they can."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.config.iceberg_config import (
    DISABLED,
    ICEBERG_CONFIG_DEF,
    MODE,
    canonical_topic_configs,
)

from .catalog import ICEBERG_DIR, open_catalog
from .heap import keep_freed_heap
from .log_source import PartitionSource
from .maintenance import Expired
from .metrics import IcebergCollector
from .opening_side import OpeningSide
from .priority import lower_thread_priority
from .schemas import Codecs, SchemaSource
from .table_writer import LocalTables
from .tables import Tables
from .translator import FlushResult, TableSide, TopicSettings, TopicTranslator
from .worker_tables import WorkerTables

if TYPE_CHECKING:
    from tidelog.server.broker import Broker
    from tidelog.util.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionTableView:
    partition: int
    committed_offset: int  # the next offset the table holds for the partition
    lag_records: int | None  # None: not led here
    lag_ms: float | None


@dataclass(frozen=True)
class TableView:
    table: str
    snapshot_id: int | None
    partitions: list[PartitionTableView]
    paused: str | None  # why translation is paused, if it is


@dataclass
class _Topic:
    translator: TopicTranslator
    delete_table: bool
    next_flush: float = 0.0
    next_maintenance: float = 0.0  # monotonic time of the next maintenance pass
    running: bool = False  # a flush is on the translation thread
    maintaining: bool = False  # a maintenance pass is on the maintenance thread
    took: list[float] = field(default_factory=list)  # the last flushes' durations (s)
    failing: str | None = None  # why the last flush failed (translation paused)
    last: FlushResult | None = None
    expired: Expired | None = None  # what the last snapshot expiry did
    maintained: int = 0  # maintenance passes done


class IcebergService:
    def __init__(self, broker: Broker, schemas: SchemaSource | None, *,
                 tick_s: float = 0.2) -> None:
        originals = broker.config.originals
        self.values = ICEBERG_CONFIG_DEF.parse(
            {k: v for k, v in originals.items() if k in ICEBERG_CONFIG_DEF})
        self.broker = broker
        self.source = PartitionSource(broker.replica_manager)
        self.schemas = schemas
        self.codecs = Codecs(schemas)
        self.log_dir = broker.config.log_dirs[0]
        self.tables: Tables | None = None  # the catalog's tables, in this process
        self.side: TableSide | None = None  # where the table side runs
        self.worker: WorkerTables | None = None  # iceberg.translation.process
        self.topics: dict[str, _Topic] = {}
        self.tick_s = tick_s
        self.clock: Clock = broker.clock  # wall-clock time of snapshot expiry
        self.maintenance_s = int(self.values["iceberg.maintenance.interval.ms"]) / 1000
        self.orphan_age_ms = int(self.values["iceberg.orphan.files.older.than.ms"])
        # both threads at a lower OS priority than the event loop (iceberg.translation.nice);
        # with a worker process, the worker instead: the threads here hold the interpreter
        # lock only to read the log and talk to it, and a thread descheduled while it holds
        # the lock would stall the event loop
        self.nice = int(self.values["iceberg.translation.nice"])
        in_process = bool(self.values["iceberg.translation.process"])
        lower = functools.partial(lower_thread_priority, 0 if in_process else self.nice)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="iceberg-translation",
                                        initializer=lower)
        # snapshot expiry and orphan-file removal: off the translation thread, so that a
        # long pass does not hold flushes back (a commit of either that races the other's
        # is applied by the catalog to its current metadata, or refused and retried)
        self._maintenance = ThreadPoolExecutor(1, thread_name_prefix="iceberg-maintenance",
                                               initializer=lower)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the catalog; if it cannot be opened now, the broker starts anyway and each
        flush tries again (``OpeningSide``)."""
        loop = asyncio.get_running_loop()
        if not self.values["iceberg.translation.process"]:
            keep_freed_heap()  # the flushes run in this process: their blocks kept for
            # the next (iceberg/heap.py)
        try:
            self.side = await loop.run_in_executor(self._pool, self._open)
        except Exception as exc:
            log.warning("Iceberg catalog not opened (%s: %s): translation waits for it, and "
                        "retention keeps every record of Iceberg topics meanwhile",
                        type(exc).__name__, exc)
            self.side = OpeningSide(self._open, str(self.values["iceberg.namespace"]),
                                    not self.values["iceberg.translation.process"])
        self._task = loop.create_task(self._run())

    def _open(self) -> TableSide:
        if self.values["iceberg.translation.process"]:
            if self.worker is None:  # (one that started but could not open it: asked again)
                self.worker = WorkerTables(self.values, self.log_dir, self.nice, self.schemas)
            self.worker.start()
            return self.worker
        catalog = open_catalog(self.values, self.log_dir)
        tables = Tables(catalog, str(self.values["iceberg.namespace"]),
                        self.log_dir / ICEBERG_DIR / "pending")
        removed = tables.clean_pending()
        if removed:
            log.info("removed %d files of Iceberg commits a crash interrupted", removed)
        self.tables = tables
        return LocalTables(tables, self.codecs)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._pool.shutdown)
        await loop.run_in_executor(None, self._maintenance.shutdown)
        if self.side is not None:
            await loop.run_in_executor(None, self.side.close)
        if self.worker is not None and self.worker is not self.side:  # never opened one
            await loop.run_in_executor(None, self.worker.close)
        for name in list(self.topics):
            self._set_floors(name, None)

    async def _run(self) -> None:
        while True:
            try:
                self._tick()
            except Exception:  # a bug must not end translation for good
                log.exception("iceberg translation tick failed")
            await asyncio.sleep(self.tick_s)

    def _tick(self) -> None:
        rm = self.broker.replica_manager
        # the mode has no broker-wide default: a topic is translated iff its override says so
        wanted = {info.name for info in rm.topics()
                  if canonical_topic_configs(info.configs).get(MODE, DISABLED) != DISABLED}
        for name in list(self.topics):
            if name not in wanted:
                self._forget(name, deleted=rm.topic(name) is None)
        now = time.monotonic()
        for name in wanted:
            topic = self._topic(name)
            self._set_floors(name, topic.translator)
            if (not topic.maintaining and self.maintenance_s > 0
                    and now >= topic.next_maintenance):
                topic.maintaining = True
                fut_m = asyncio.get_running_loop().run_in_executor(
                    self._maintenance, self._maintain, topic.translator,
                    self.clock.milliseconds())
                fut_m.add_done_callback(functools.partial(self._maintained, topic))
            if not topic.running and now >= topic.next_flush:
                topic.running = True
                fut = asyncio.get_running_loop().run_in_executor(
                    self._pool, topic.translator.flush)
                fut.add_done_callback(functools.partial(self._flushed, topic))

    def _topic(self, name: str) -> _Topic:
        cfg = self.broker.replica_manager.topic_config(name)
        lag = cfg.tidelog_iceberg_target_lag_ms
        settings = TopicSettings(
            name, cfg.tidelog_iceberg_mode, cfg.tidelog_iceberg_partition_spec,
            cfg.tidelog_iceberg_invalid_record_action,
            lag if lag > 0 else int(self.values["iceberg.target.lag.ms"]),
            str(self.values["iceberg.dlq.table.suffix"]))
        topic = self.topics.get(name)
        if topic is None or topic.translator.settings != settings:
            assert self.side is not None
            translator = TopicTranslator(settings, self.source, self.side)
            if topic is None:
                # a record produced as the topic appears is in the table within the target
                # lag, with half of it left for the first flush (it creates the table)
                now = time.monotonic()
                first = now + settings.target_lag_ms / 2000
                topic = self.topics[name] = _Topic(
                    translator, cfg.tidelog_iceberg_delete, next_flush=first,
                    next_maintenance=now + first_maintenance_s(self.maintenance_s))
            else:  # the topic's settings changed: the next flush uses the new ones
                translator.committed = topic.translator.committed
                topic.translator = translator
        topic.delete_table = cfg.tidelog_iceberg_delete
        return topic

    def _flushed(self, topic: _Topic, fut: asyncio.Future[FlushResult]) -> None:
        topic.running = False
        lag_s = topic.translator.settings.target_lag_ms / 1000
        now = time.monotonic()
        started = topic.translator.flush_started or now
        topic.took = [*topic.took[-2:], max(0.0, now - started)]
        # the next flush starts within a tick of its time: room for that too
        topic.next_flush = next_flush(started, max(topic.took) + self.tick_s, now, lag_s)
        exc = fut.exception() if not fut.cancelled() else None
        if exc is None and not fut.cancelled():
            if topic.failing is not None:
                log.info("%s: Iceberg translation resumed", topic.translator.settings.topic)
            topic.failing = None
            topic.last = fut.result()
            return
        reason = f"{type(exc).__name__}: {exc}"
        if topic.failing != reason:
            log.warning("%s: Iceberg translation paused (%s); retrying",
                        topic.translator.settings.topic, reason)
        topic.failing = reason
        topic.next_flush = time.monotonic() + min(lag_s, 1.0)

    def _maintain(self, translator: TopicTranslator, now_ms: int) -> Expired:
        """A maintenance pass of one topic (the maintenance thread, beside the topic's
        flushes): files of commits whose outcome was unknown, then the tables' snapshots and
        orphan files."""
        return translator.maintain(now_ms, self.orphan_age_ms)

    def _maintained(self, topic: _Topic, fut: asyncio.Future[Expired]) -> None:
        topic.maintaining = False
        # counted from its end: however long it took, flushes run in between
        topic.next_maintenance = time.monotonic() + self.maintenance_s
        exc = fut.exception() if not fut.cancelled() else None
        if exc is not None:  # a commit raced it, or the catalog is away: next interval
            log.warning("%s: Iceberg snapshot expiry failed (%s: %s)",
                        topic.translator.settings.topic, type(exc).__name__, exc)
        elif not fut.cancelled():
            topic.expired = fut.result()
            topic.maintained += 1

    def _set_floors(self, name: str, translator: TopicTranslator | None) -> None:
        for tp in self.source.topic_partitions(name):
            floor = translator.floor(tp.partition) if translator is not None else None
            self.source.set_retention_floor(tp, floor)

    def _forget(self, name: str, *, deleted: bool) -> None:
        topic = self.topics.pop(name)
        if not deleted:
            self._set_floors(name, None)
            return
        if topic.delete_table and self.side is not None:
            self._pool.submit(self.side.drop, name, topic.translator.settings.dlq_name)

    def threads(self) -> list[threading.Thread]:
        """The translation and maintenance threads started so far (each starts with its
        first task)."""
        return [*self._pool._threads, *self._maintenance._threads]

    def collector(self) -> IcebergCollector:
        """The ``/metrics`` collector of translation lag (register it on the HTTP listener)."""
        return IcebergCollector(self.topics, self.worker)

    def lag(self) -> dict[str, dict[int, int]]:
        """Records not yet in the table, per topic and partition led here."""
        return {name: t.translator.lag() for name, t in self.topics.items()}

    def table_view(self, name: str) -> TableView | None:
        """What the console's topic page and ``topics --describe`` show of a topic's table
        (None: the topic is not translated here). Reads no catalog: the translator's own
        view as of its last flush."""
        topic = self.topics.get(name)
        if topic is None or self.side is None:
            return None
        t = topic.translator
        behind = t.lag_ms(time.monotonic())
        lag = t.lag()
        rows = [PartitionTableView(p, t.committed.get(p, 0), lag.get(p), behind.get(p))
                for p in sorted(set(t.committed) | set(lag))]
        return TableView(self.side.identifier(name), t.snapshot_id, rows, topic.failing)

    async def flush_topic(self, name: str) -> FlushResult:
        """Flush one topic now, on the translation thread (after any flush running there)."""
        translator = self.topics[name].translator
        return await asyncio.get_running_loop().run_in_executor(self._pool, translator.flush)


INITIAL_MAINTENANCE_DELAY_S = 30.0  # Kafka's log manager: InitialTaskDelayMs (30 s)


def first_maintenance_s(interval_s: float) -> float:
    """How long after a topic appears its first maintenance pass runs: one interval, but
    at most Kafka's initial task delay (its log manager starts retention and the cleaner
    30 s after start-up). A new table has nothing to expire; a pass at once would run
    beside the first flush."""
    return min(interval_s, INITIAL_MAINTENANCE_DELAY_S)


def next_flush(started: float, took: float, finished: float, target_lag_s: float) -> float:
    """When the next flush starts so that a record produced just after this flush read the
    log (at ``started``) is committed within the target lag: the next flush, taking up to
    ``took`` (the longest of the last few), must end by ``started + target``. Flushes that
    take half the target or more run back to back."""
    return max(finished, started + target_lag_s - took)
