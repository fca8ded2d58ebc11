"""``/metrics`` of Iceberg topics: per partition led here, the records not yet in the table
and how long the table has been behind; per topic, whether translation is paused. The
starter registers the collector on the broker's HTTP listener (``http.listeners``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .translator import TopicTranslator


class TranslatedTopic(Protocol):
    """What the collector reads of an Iceberg topic the service translates."""

    translator: TopicTranslator
    failing: str | None  # why the last flush failed (translation paused)


class IcebergCollector(Collector):
    def __init__(self, topics: Mapping[str, TranslatedTopic]) -> None:
        self.topics = topics  # the service's, by name (read at each collect)

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
            for p, lag in sorted(translator.lag().items()):
                records.add_metric([name, str(p)], lag)
                since = translator.behind_since.get(p)
                ms.add_metric([name, str(p)], 0 if lag == 0 or since is None else
                              (now - since) * 1000)
            paused.add_metric([name], 1 if topic.failing is not None else 0)
        yield records
        yield ms
        yield paused
