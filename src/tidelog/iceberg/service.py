"""Iceberg topics at one broker: a translator per topic whose ``tidelog.iceberg.mode`` is not
``disabled``, flushed every target lag on one translation thread (never on the event loop),
retention floors under the partitions it hosts, and the tables of deleted topics dropped
(``tidelog.iceberg.delete``).

A flush that fails (catalog or warehouse unreachable) commits nothing: translation pauses,
the lag grows, producers go on, and the next flush starts from the table again."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelog.config.iceberg_config import (
    DISABLED,
    ICEBERG_CONFIG_DEF,
    MODE,
    canonical_topic_configs,
)

from .catalog import ICEBERG_DIR, open_catalog
from .log_source import PartitionSource
from .metrics import IcebergCollector
from .schemas import Codecs, SchemaSource
from .tables import Tables
from .translator import FlushResult, TopicSettings, TopicTranslator

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

log = logging.getLogger(__name__)


@dataclass
class _Topic:
    translator: TopicTranslator
    delete_table: bool
    next_flush: float = 0.0
    running: bool = False
    failing: str | None = None  # why the last flush failed (translation paused)
    last: FlushResult | None = None


class IcebergService:
    def __init__(self, broker: Broker, schemas: SchemaSource | None, *,
                 tick_s: float = 0.2) -> None:
        originals = broker.config.originals
        self.values = ICEBERG_CONFIG_DEF.parse(
            {k: v for k, v in originals.items() if k in ICEBERG_CONFIG_DEF})
        self.broker = broker
        self.source = PartitionSource(broker.replica_manager)
        self.codecs = Codecs(schemas)
        self.log_dir = broker.config.log_dirs[0]
        self.tables: Tables | None = None
        self.topics: dict[str, _Topic] = {}
        self.tick_s = tick_s
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="iceberg-translation")
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.tables = await loop.run_in_executor(self._pool, self._open)
        self._task = loop.create_task(self._run())

    def _open(self) -> Tables:
        catalog = open_catalog(self.values, self.log_dir)
        tables = Tables(catalog, str(self.values["iceberg.namespace"]),
                        self.log_dir / ICEBERG_DIR / "pending")
        removed = tables.clean_pending()
        if removed:
            log.info("removed %d files of Iceberg commits a crash interrupted", removed)
        return tables

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)
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
            assert self.tables is not None
            translator = TopicTranslator(settings, self.source, self.tables, self.codecs)
            if topic is None:
                first = time.monotonic() + settings.target_lag_ms / 1000  # a flush per lag
                topic = self.topics[name] = _Topic(translator, cfg.tidelog_iceberg_delete,
                                                   next_flush=first)
            else:  # the topic's settings changed: the next flush uses the new ones
                translator.committed = topic.translator.committed
                topic.translator = translator
        topic.delete_table = cfg.tidelog_iceberg_delete
        return topic

    def _flushed(self, topic: _Topic, fut: asyncio.Future[FlushResult]) -> None:
        topic.running = False
        lag_s = topic.translator.settings.target_lag_ms / 1000
        topic.next_flush = time.monotonic() + lag_s
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

    def _set_floors(self, name: str, translator: TopicTranslator | None) -> None:
        for tp in self.source.topic_partitions(name):
            floor = translator.floor(tp.partition) if translator is not None else None
            self.source.set_retention_floor(tp, floor)

    def _forget(self, name: str, *, deleted: bool) -> None:
        topic = self.topics.pop(name)
        if not deleted:
            self._set_floors(name, None)
            return
        if topic.delete_table and self.tables is not None:
            tables = self.tables
            dlq = topic.translator.settings.dlq_name
            self._pool.submit(tables.drop, name)
            self._pool.submit(tables.drop, dlq)

    def collector(self) -> IcebergCollector:
        """The ``/metrics`` collector of translation lag (register it on the HTTP listener)."""
        return IcebergCollector(self.topics)

    def lag(self) -> dict[str, dict[int, int]]:
        """Records not yet in the table, per topic and partition led here."""
        return {name: t.translator.lag() for name, t in self.topics.items()}

    async def flush_topic(self, name: str) -> FlushResult:
        """Flush one topic now, on the translation thread (after any flush running there)."""
        translator = self.topics[name].translator
        return await asyncio.get_running_loop().run_in_executor(self._pool, translator.flush)
