"""``/metrics``: what clients pushed with KIP-714 PushTelemetry, per client instance.

Each OTLP metric is one family under its Prometheus name (``org_apache_kafka_...``), its
samples labelled with the client instance (``client_instance_id``, ``client_id``,
``client_software_name``, ``client_software_version``, ``client_source_address``) besides
the metric's own attributes; the broker's side of it (instances, throttled and
unknown-subscription requests) is Kafka's ``client-metrics`` group.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidelog.server.telemetry import HasTelemetry, manager_for
from tidelog.server.telemetry.manager import ClientInstance
from tidelog.server.telemetry.otlp import COUNTER

INSTANCE_LABELS = ("client_instance_id", "client_id", "client_software_name",
                   "client_software_version", "client_source_address")


def instance_labels(inst: ClientInstance) -> dict[str, str]:
    return {k: inst.attributes.get(k, "") for k in INSTANCE_LABELS}


class ClientMetricsCollector(Collector):
    def __init__(self, broker: HasTelemetry) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        manager = manager_for(self.broker)
        manager.expire()
        instances = sorted(manager.instances.values(), key=lambda i: str(i.client_instance_id))
        yield GaugeMetricFamily("kafka_server_client_metrics_instance_count",
                                "client-metrics instance-count: client instances the broker "
                                "keeps", value=len(instances))  # fmt: skip
        throttle = CounterMetricFamily("kafka_server_client_metrics_throttle",
                                       "client-metrics throttle: telemetry requests before "
                                       "their push interval")  # fmt: skip
        throttle.add_metric([], manager.throttled)
        yield throttle
        unknown = CounterMetricFamily("kafka_server_client_metrics_unknown_subscription_request",
                                      "client-metrics unknown-subscription-request")  # fmt: skip
        unknown.add_metric([], manager.unknown_subscription_requests)
        yield unknown
        yield from self._pushed(instances)

    def _pushed(self, instances: list[ClientInstance]) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for inst in instances:
            base = instance_labels(inst)
            for name, fam in sorted(inst.received.families.items()):
                if fam.kind == COUNTER:
                    name = name.removesuffix("_total")
                out = families.get(name)
                if out is None:
                    kind = "counter" if fam.kind == COUNTER else "gauge"
                    out = families[name] = Metric(name, fam.description or name, kind)
                sample = name + "_total" if fam.kind == COUNTER else name
                for labels, value in fam.values.items():
                    out.add_sample(sample, {**dict(labels), **base}, value)
        yield from families.values()
