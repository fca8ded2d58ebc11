"""``/metrics`` of Iceberg topics: per partition led here, the records not yet in the table
and how long the table has been behind; per topic, whether translation is paused; with a
translation worker process, its pid and how many were started (one more after each death). The
starter registers the collector on the broker's HTTP listener (``http.listeners``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .translator import TopicTranslator


class TranslatedTopic(Protocol):
    """What the collector reads of an Iceberg topic the service translates."""

    translator: TopicTranslator
    failing: str | None  # why the last flush failed (translation paused)


class TranslationWorker(Protocol):
    """What the collector reads of the translation worker process."""

    starts: int  # worker processes started

    @property
    def pid(self) -> int | None: ...


class IcebergCollector(Collector):
    def __init__(self, topics: Mapping[str, TranslatedTopic],
                 worker: TranslationWorker | None = None) -> None:
        self.topics = topics  # the service's, by name (read at each collect)
        self.worker = worker

    def collect(self) -> Iterator[Metric]:
        records = GaugeMetricFamily(
            "tidelog_iceberg_translation_lag_records",
            "Committed records of a partition led here that its Iceberg table lacks",
            labels=["topic", "partition"])
        ms = GaugeMetricFamily(
            "tidelog_iceberg_translation_lag_ms",
            "How long the partition's Iceberg table has been behind its last stable offset",
            labels=["topic", "partition"])
        paused = GaugeMetricFamily(
            "tidelog_iceberg_translation_paused",
            "1 while the topic's flushes fail (catalog or warehouse unreachable)",
            labels=["topic"])
        now = time.monotonic()
        for name, topic in list(self.topics.items()):
            translator = topic.translator
            behind = translator.lag_ms(now)
            for p, lag in sorted(translator.lag().items()):
                records.add_metric([name, str(p)], lag)
                ms.add_metric([name, str(p)], behind.get(p, 0.0))
            paused.add_metric([name], 1 if topic.failing is not None else 0)
        yield records
        yield ms
        yield paused
        if self.worker is not None:
            yield CounterMetricFamily(
                "tidelog_iceberg_translation_worker_starts",
                "Translation worker processes started (one more after each that died)",
                value=self.worker.starts)
            yield GaugeMetricFamily(
                "tidelog_iceberg_translation_worker_pid",
                "Process id of the translation worker (0: none running)",
                value=self.worker.pid or 0)
