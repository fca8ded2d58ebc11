"""KIP-714 client telemetry: client metrics subscriptions (the CLIENT_METRICS config
resource), GetTelemetrySubscriptions (71) and PushTelemetry (72), and what clients pushed,
for /metrics.

The broker advertises 71 and 72 only where it has somewhere to put what clients push: an
HTTP listener serving /metrics (Kafka advertises them only with a metrics receiver plugin).
Without a subscription matching a client, the client is told to push nothing.
"""

from __future__ import annotations

import weakref
from typing import Protocol

from tidelog.config.broker_config import BrokerConfig
from tidelog.util.clock import Clock

from .manager import DEFAULT_TELEMETRY_MAX_BYTES, ClientMetricsManager

__all__ = ["ClientMetricsManager", "manager_for", "telemetry_enabled"]


class HasTelemetry(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...


_MANAGERS: weakref.WeakKeyDictionary[object, ClientMetricsManager] = (
    weakref.WeakKeyDictionary())


def telemetry_enabled(broker: HasTelemetry) -> bool:
    """A receiver exists: the broker serves /metrics."""
    return any(str(u).strip() for u in broker.config.values.get("http.listeners") or [])


def manager_for(broker: HasTelemetry) -> ClientMetricsManager:
    """The broker's client metrics manager, made (and its subscriptions read from the
    first log dir) on first use."""
    found = _MANAGERS.get(broker)
    if found is None:
        raw = broker.config.originals.get("telemetry.max.bytes", DEFAULT_TELEMETRY_MAX_BYTES)
        found = ClientMetricsManager(broker.clock, telemetry_max_bytes=max(int(raw), 1))
        found.configs.attach(broker.config.log_dirs[0])
        _MANAGERS[broker] = found
    return found
