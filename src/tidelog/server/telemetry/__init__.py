"""KIP-714 client telemetry: client metrics subscriptions (the CLIENT_METRICS config
resource), GetTelemetrySubscriptions (71) and PushTelemetry (72), and what clients pushed,
for /metrics.

The broker advertises 71 and 72 only where it has somewhere to put what clients push: an
HTTP listener serving /metrics (Kafka advertises them only with a metrics receiver plugin).
Without a subscription matching a client, the client is told to push nothing.
Subscriptions live in ``client-metrics-configs.json`` on a single broker and in ZooKeeper
in a cluster (server/zk/client_metrics_configs.py, made by the ClusterNode). The manager
is imported with the first request that needs it: ApiVersions asks only whether telemetry
is on.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Protocol

from tidelog.config.broker_config import BrokerConfig
from tidelog.util.clock import Clock

if TYPE_CHECKING:
    from tidelog.server.cluster_node import ClusterNode
    from tidelog.server.connection import KafkaConnection

    from .manager import ClientMetricsManager

__all__ = ["manager_for", "telemetry_enabled"]


class HasTelemetry(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def cluster(self) -> ClusterNode | None: ...

    @property
    def connections(self) -> set[KafkaConnection]: ...


_MANAGERS: weakref.WeakKeyDictionary[object, ClientMetricsManager] = (
    weakref.WeakKeyDictionary())


def telemetry_enabled(broker: HasTelemetry) -> bool:
    """A receiver exists: the broker serves /metrics."""
    return any(str(u).strip() for u in broker.config.values.get("http.listeners") or [])


def manager_for(broker: HasTelemetry) -> ClientMetricsManager:
    """The broker's client metrics manager, made on first use: its subscriptions read from
    the first log dir, or in a cluster from ZooKeeper and kept current from there."""
    found = _MANAGERS.get(broker)
    if found is None:
        from .manager import DEFAULT_TELEMETRY_MAX_BYTES, ClientMetricsManager

        raw = broker.config.originals.get("telemetry.max.bytes", DEFAULT_TELEMETRY_MAX_BYTES)
        found = ClientMetricsManager(broker.clock, telemetry_max_bytes=max(int(raw), 1))
        connections = broker.connections
        found.live_connections = lambda: [c.state for c in list(connections)]
        cluster = broker.cluster
        if cluster is not None:  # in ZooKeeper, applied by every broker
            found.configs = cluster.client_metrics_configs(broker.clock.milliseconds())
        else:
            found.configs.attach(broker.config.log_dirs[0])
        _MANAGERS[broker] = found
    return found
