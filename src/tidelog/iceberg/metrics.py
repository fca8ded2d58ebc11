"""``/metrics`` of Iceberg topics: per partition led here, the records not yet in the table
and how long the table has been behind; per topic, whether translation is paused. The
starter registers the collector on the broker's HTTP listener (``http.listeners``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .service import IcebergService


class IcebergCollector(Collector):
    def __init__(self, service: IcebergService) -> None:
        self.service = service

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
        for name, topic in list(self.service.topics.items()):
            translator = topic.translator
            behind = translator.lag_ms(now)
            for p, lag in sorted(translator.lag().items()):
                records.add_metric([name, str(p)], lag)
                ms.add_metric([name, str(p)], behind.get(p, 0.0))
            paused.add_metric([name], 1 if topic.failing is not None else 0)
        yield records
        yield ms
        yield paused
