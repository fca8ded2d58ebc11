"""Tiered storage metrics (KIP-405/KIP-958 BrokerTopicMetrics): plain totals and per-partition
gauges the RemoteLogManager records on the event loop and ``/metrics`` reads when scraped.

Meters (``...PerSec``, exported as ``_total`` counters): RemoteCopyBytes, RemoteFetchBytes,
RemoteCopyRequests, RemoteFetchRequests, RemoteCopyErrors, RemoteFetchErrors,
RemoteDeleteRequests, RemoteDeleteErrors. Gauges, summed over a topic's partitions as Kafka's
are: RemoteCopyLagBytes, RemoteCopyLagSegments, RemoteLogSizeBytes, RemoteLogMetadataCount.
"""

from __future__ import annotations

METERS = (
    ("remote_copy_bytes", "RemoteCopyBytesPerSec"),
    ("remote_fetch_bytes", "RemoteFetchBytesPerSec"),
    ("remote_copy_requests", "RemoteCopyRequestsPerSec"),
    ("remote_fetch_requests", "RemoteFetchRequestsPerSec"),
    ("remote_copy_errors", "RemoteCopyErrorsPerSec"),
    ("remote_fetch_errors", "RemoteFetchErrorsPerSec"),
    ("remote_delete_requests", "RemoteDeleteRequestsPerSec"),
    ("remote_delete_errors", "RemoteDeleteErrorsPerSec"),
)
GAUGES = (
    ("remote_copy_lag_bytes", "RemoteCopyLagBytes"),
    ("remote_copy_lag_segments", "RemoteCopyLagSegments"),
    ("remote_log_size_bytes", "RemoteLogSizeBytes"),
    ("remote_log_metadata_count", "RemoteLogMetadataCount"),
)


class RemoteTopicStats:
    """One topic's (or all topics') tiered storage meters."""

    __slots__ = tuple(attr for attr, _ in METERS)

    def __init__(self) -> None:
        for attr in self.__slots__:
            setattr(self, attr, 0)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class RemoteLogMetrics:
    """Kafka's remote BrokerTopicMetrics: meters per topic plus all topics, and gauges per
    partition (read per topic)."""

    def __init__(self) -> None:
        self.all_topics = RemoteTopicStats()
        self._topics: dict[str, RemoteTopicStats] = {}
        # gauge name -> (topic, partition) -> value
        self.gauges: dict[str, dict[tuple[str, int], int]] = {g: {} for g, _ in GAUGES}

    def topic(self, name: str) -> RemoteTopicStats:
        stats = self._topics.get(name)
        if stats is None:
            stats = self._topics[name] = RemoteTopicStats()
        return stats

    def topics(self) -> dict[str, RemoteTopicStats]:
        return dict(self._topics)

    def mark(self, topic: str, meter: str, n: int = 1) -> None:
        """Add ``n`` to ``meter`` (an attribute of RemoteTopicStats) of ``topic`` and all."""
        t = self.topic(topic)
        setattr(t, meter, getattr(t, meter) + n)
        setattr(self.all_topics, meter, getattr(self.all_topics, meter) + n)

    def set_gauge(self, gauge: str, topic: str, partition: int, value: int) -> None:
        self.gauges[gauge][(topic, partition)] = value

    def topic_gauge(self, gauge: str, topic: str) -> int:
        return sum(v for (t, _p), v in self.gauges[gauge].items() if t == topic)

    def remove_partition(self, topic: str, partition: int) -> None:
        for values in self.gauges.values():
            values.pop((topic, partition), None)

    def remove_topic(self, name: str) -> None:
        self._topics.pop(name, None)
        for values in self.gauges.values():
            for key in [k for k in values if k[0] == name]:
                del values[key]
