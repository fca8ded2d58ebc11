"""Hot-path recording: plain integer fields bumped in place, read at scrape time.

Kafka marks a Yammer ``Meter`` per topic on every append (BrokerTopicStats). A
``prometheus_client.Counter`` takes a lock per ``inc``; here recording is an attribute
``+=`` on a ``__slots__`` object (one dict lookup for the topic), and the collectors in the
HTTP package turn the totals into Prometheus counters when a scraper asks. Everything is
recorded on the broker's event-loop thread, so no lock is needed.
"""

from __future__ import annotations


class TopicStats:
    """One topic's (or all topics') BrokerTopicMetrics totals."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "failed_fetch_requests",
        "failed_produce_requests",
        "messages_in",
        "total_fetch_requests",
        "total_produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: per-topic totals plus the all-topics aggregate."""

    def __init__(self) -> None:
        self.all_topics = TopicStats()
        self._topics: dict[str, TopicStats] = {}
        self.replication_bytes_out = 0  # ReplicationBytesOutPerSec: sent to followers

    def topic(self, name: str) -> TopicStats:
        stats = self._topics.get(name)
        if stats is None:
            stats = self._topics[name] = TopicStats()
        return stats

    def topics(self) -> dict[str, TopicStats]:
        return dict(self._topics)

    def remove_topic(self, name: str) -> None:
        """A deleted topic's series go away (Kafka's removeMetrics on topic deletion)."""
        self._topics.pop(name, None)

    def record_append(self, topic: str, size: int, messages: int) -> None:
        """A produced partition was appended: ``size`` batch bytes, ``messages`` records."""
        t = self._topics.get(topic) or self.topic(topic)  # (a call for a new topic only)
        a = self.all_topics
        t.total_produce_requests += 1
        a.total_produce_requests += 1
        t.bytes_in += size
        a.bytes_in += size
        t.messages_in += messages
        a.messages_in += messages

    def record_append_failed(self, topic: str) -> None:
        t = self.topic(topic)
        t.total_produce_requests += 1
        t.failed_produce_requests += 1
        self.all_topics.total_produce_requests += 1
        self.all_topics.failed_produce_requests += 1

    def record_fetch(self, topic: str, size: int, failed: int = 0,
                     follower: bool = False, partitions: int = 1) -> None:
        """Fetched partitions of ``topic`` (``failed`` of them answered an error; a bool is
        one): ``size`` record bytes sent, to a consumer (BytesOutPerSec) or to a follower
        (ReplicationBytesOutPerSec), as Kafka's updateBytesOut; each partition counts a
        fetch request of the topic, as Kafka's readFromLocalLog marks them."""
        t = self.topic(topic)
        a = self.all_topics
        t.total_fetch_requests += partitions
        a.total_fetch_requests += partitions
        if follower:
            self.replication_bytes_out += size
        else:
            t.bytes_out += size
            a.bytes_out += size
        if failed:
            t.failed_fetch_requests += failed
            a.failed_fetch_requests += failed
