"""Metrics with Kafka's names, cheap to record (a low package like ``util``: ``storage`` and
``server`` may import it; it imports nothing of ours).

``stats.BrokerTopicStats`` (bytes/messages in and out per topic), ``requests.RequestMetrics``
(rate and stage times per API) and ``histogram.LOG_FLUSH_STATS`` are plain objects bumped
on the hot path; the HTTP package's collectors read them, and the broker's state, when
``/metrics`` is scraped. docs/metrics.md lists every exported name and its Kafka MBean.
"""

from .histogram import LOG_FLUSH_STATS, LatencyHistogram, LogFlushTimer
from .requests import (
    CURRENT_REQUEST,
    RequestMetrics,
    RequestTiming,
    add_remote_time,
    api_name,
    begin_request,
)
from .stats import BrokerTopicStats, TopicStats

__all__ = [
    "CURRENT_REQUEST",
    "LOG_FLUSH_STATS",
    "BrokerTopicStats",
    "LatencyHistogram",
    "LogFlushTimer",
    "RequestMetrics",
    "RequestTiming",
    "TopicStats",
    "add_remote_time",
    "api_name",
    "begin_request",
]
