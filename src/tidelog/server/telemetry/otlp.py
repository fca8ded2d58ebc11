"""A PushTelemetry payload: OpenTelemetry ``MetricsData`` (protobuf, OTLP v1), compressed
with the codec the client chose among those GetTelemetrySubscriptions accepted, decoded
into Prometheus-shaped points, and the values a client instance has pushed so far.

Names become Prometheus names (``org.apache.kafka.producer.node.request.latency.avg`` ->
``org_apache_kafka_producer_node_request_latency_avg``); resource and data point attributes
become labels. A monotonic sum is a counter, anything else a gauge; a histogram gives its
``_count`` and ``_sum``. Delta points (the broker asks for delta temporality, as Kafka) are
added to what the instance pushed before, so a counter on /metrics is cumulative.

protobuf and the OTLP classes are imported by the first push: a broker no client pushes
metrics to never loads them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tidelog.records.compression import decompress

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1 import metrics_pb2

GAUGE, COUNTER = "gauge", "counter"
DELTA = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA (OTLP's metrics.proto)
Labels = tuple[tuple[str, str], ...]
_BAD = re.compile(r"[^a-zA-Z0-9_]")


class PayloadError(ValueError):
    """The payload does not decompress or is no OTLP MetricsData."""


class Point(NamedTuple):
    name: str
    kind: str
    labels: Labels
    value: float
    delta: bool
    description: str = ""


@functools.lru_cache(maxsize=8192)
def prometheus_name(name: str) -> str:
    out = _BAD.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _value(v: AnyValue) -> str:
    kind = v.WhichOneof("value")
    if kind is None:
        return ""
    raw = getattr(v, kind)
    if kind == "bool_value":
        return "true" if raw else "false"
    return str(raw) if kind in ("string_value", "int_value", "double_value") else ""


def _labels(attrs: Iterable[KeyValue]) -> Labels:
    return tuple(sorted({prometheus_name(kv.key): _value(kv.value) for kv in attrs}.items()))


def _number(p: metrics_pb2.NumberDataPoint) -> float:
    return float(p.as_int) if p.WhichOneof("value") == "as_int" else float(p.as_double)


def _points(metric: metrics_pb2.Metric, resource: Labels) -> Iterator[Point]:
    name, doc = prometheus_name(metric.name), metric.description
    kind = metric.WhichOneof("data")
    if kind == "gauge":
        for p in metric.gauge.data_points:
            yield Point(name, GAUGE, _merge(resource, p.attributes), _number(p), False, doc)
    elif kind == "sum":
        s = metric.sum
        family = COUNTER if s.is_monotonic else GAUGE
        delta = s.aggregation_temporality == DELTA
        for p in s.data_points:
            yield Point(name, family, _merge(resource, p.attributes), _number(p), delta, doc)
    elif kind == "histogram":
        h = metric.histogram
        delta = h.aggregation_temporality == DELTA
        for hp in h.data_points:
            labels = _merge(resource, hp.attributes)
            yield Point(name + "_count", COUNTER, labels, float(hp.count), delta, doc)
            yield Point(name + "_sum", COUNTER, labels, float(hp.sum), delta, doc)


def _merge(resource: Labels, attrs: Iterable[KeyValue]) -> Labels:
    if not attrs:
        return resource
    own = _labels(attrs)
    if not resource:
        return own
    return tuple(sorted({**dict(resource), **dict(own)}.items()))


def decode(compression: int, payload: bytes, max_bytes: int) -> list[Point]:
    """The points of one push (``max_bytes`` bounds the decompressed size too)."""
    try:
        raw = decompress(compression, payload, max_size=max(max_bytes, 1) * 64) if (
            compression) else payload
    except Exception as exc:
        raise PayloadError(f"cannot decompress the metrics (codec {compression}): {exc}") from exc
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as exc:
        raise PayloadError(f"the metrics are no OTLP MetricsData: {exc}") from exc
    out: list[Point] = []
    for rm in data.resource_metrics:
        resource = _labels(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                out.extend(_points(metric, resource))
    return out


@dataclass
class Family:
    kind: str
    description: str
    values: dict[Labels, float] = field(default_factory=dict)


@dataclass
class ReceivedMetrics:
    """What one client instance has pushed: family name -> labels -> value."""

    families: dict[str, Family] = field(default_factory=dict)
    pushes: int = 0

    def apply(self, points: list[Point]) -> None:
        self.pushes += 1
        for p in points:
            fam = self.families.get(p.name)
            if fam is None or fam.kind != p.kind:
                fam = self.families[p.name] = Family(p.kind, p.description)
            if p.delta:
                fam.values[p.labels] = fam.values.get(p.labels, 0.0) + p.value
            else:
                fam.values[p.labels] = p.value
