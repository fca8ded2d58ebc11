"""Broker configuration (Kafka's KafkaConfig subset): names and defaults as in Kafka.

``BrokerConfig.from_props(props)`` parses a ``server.properties`` mapping; unknown keys are
kept (Kafka warns and ignores them) so existing files load. ``log_config_defaults()`` maps
the broker-level ``log.*`` keys to topic-level names (``log.segment.bytes`` ->
``segment.bytes``) as the broker defaults a topic's overrides sit on. The key table itself
(``BROKER_CONFIG_DEF``) is declared in ``broker_config_def`` and re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .broker_config_def import BROKER_CONFIG_DEF
from .core import ConfigError
from .log_config import resolve_broker_defaults

__all__ = ["BROKER_CONFIG_DEF", "BrokerConfig", "Listener"]


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, uri: str) -> Listener:
        try:
            name, rest = uri.split("://", 1)
            host, port = rest.rsplit(":", 1)
            return cls(name.upper(), host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError("listeners", uri, "expected NAME://host:port") from None


def _protocol_map(entries: list[str]) -> dict[str, str]:
    protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.upper() not in protocols:
            raise ConfigError("listener.security.protocol.map", entry, "expected NAME:PROTOCOL")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


class BrokerConfig:
    """Typed broker settings; attribute names are the Kafka names in snake_case."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props or {})
        self.values = BROKER_CONFIG_DEF.parse(self.originals)
        listeners = [Listener.parse(u) for u in self.values["listeners"]]
        if not listeners:
            raise ConfigError("listeners", self.values["listeners"], "at least one listener")
        self.protocol_map = _protocol_map(self.values["listener.security.protocol.map"])
        names = [lst.name for lst in listeners]
        for lst in listeners:
            if lst.name not in self.protocol_map:
                raise ConfigError(
                    "listeners", lst.name, "not in listener.security.protocol.map"
                )
            if names.count(lst.name) > 1:
                raise ConfigError("listeners", lst.name, "each listener name must be unique")
        self.listeners = listeners
        self.listener = listeners[0]
        adv = [Listener.parse(u) for u in self.values["advertised.listeners"] or ()]
        # Kafka: a listener missing from advertised.listeners advertises its own address
        self.advertised = {lst.name: lst for lst in listeners} | {a.name: a for a in adv}
        self.advertised_listener = self.advertised[self.listener.name]
        if not self.advertised_listener.host:
            # Kafka: an empty host binds every interface and advertises the canonical name
            import socket

            self.advertised_listener = Listener(
                self.advertised_listener.name, socket.getfqdn(), self.advertised_listener.port
            )
            self.advertised[self.listener.name] = self.advertised_listener
        if self.advertised_listener.host in ("0.0.0.0", "::"):
            raise ConfigError(
                "advertised.listeners",
                self.advertised_listener.host,
                "cannot use the nonroutable meta-address (set advertised.listeners)",
            )
        if self.values["broker.id"] is not None and "node.id" not in self.originals:
            self.values["node.id"] = self.values["broker.id"]

        self._check_cluster()

    def _check_cluster(self) -> None:
        # Kafka's KafkaConfig checks, applied when the broker joins a cluster
        if self.zookeeper_connect is None:
            if self.values["default.replication.factor"] > 1:
                # one broker holds one replica of a partition
                raise ConfigError(
                    "default.replication.factor",
                    self.values["default.replication.factor"],
                    "a broker without zookeeper.connect is a one-broker cluster: at most 1",
                )
            return
        if self.originals.get("inter.broker.listener.name") and self.originals.get(
            "security.inter.broker.protocol"
        ):
            raise ConfigError(
                "inter.broker.listener.name",
                self.values["inter.broker.listener.name"],
                "only one of inter.broker.listener.name and security.inter.broker.protocol "
                "may be set",
            )
        name = self.inter_broker_listener_name
        if name not in self.advertised:
            raise ConfigError(
                "inter.broker.listener.name", name, "must be a listener name in listeners"
            )
        if self.values["replica.fetch.wait.max.ms"] > self.values["replica.lag.time.max.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.values["replica.fetch.wait.max.ms"],
                "should always be less than or equal to replica.lag.time.max.ms",
            )

    @property
    def zookeeper_connect(self) -> str | None:
        value = self.values["zookeeper.connect"]
        return str(value) if value else None

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self.values["zookeeper.connection.timeout.ms"]
        return int(value if value is not None else self.values["zookeeper.session.timeout.ms"])

    @property
    def broker_rack(self) -> str | None:
        value = self.values["broker.rack"]
        return str(value) if value else None

    @property
    def inter_broker_listener_name(self) -> str:
        name = self.values["inter.broker.listener.name"]
        if name:
            return str(name).upper()
        return str(self.values["security.inter.broker.protocol"])

    @property
    def inter_broker_listener(self) -> Listener:
        """The advertised address other brokers (and the controller) connect to."""
        return self.advertised[self.inter_broker_listener_name]

    def security_protocol(self, listener_name: str) -> str:
        return self.protocol_map[listener_name]

    def listener_value(self, listener_name: str, key: str) -> Any:
        """``listener.name.<listener>.<key>`` when set (Kafka's per-listener override), else
        the broker-wide ``key`` (parsed) or the raw original for keys not defined here."""
        override = self.originals.get(f"listener.name.{listener_name.lower()}.{key}")
        if override is not None:
            return override
        if key in self.values:
            return self.values[key]
        return self.originals.get(key)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> BrokerConfig:
        return cls(props)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values")
        key = name.replace("_", ".")
        if values is not None and key in values:
            return values[key]
        raise AttributeError(name)

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    def log_config_defaults(self) -> dict[str, str]:
        """Broker-level log settings given explicitly, under topic config names (the
        defaults a topic's overrides sit on; unset keys keep Kafka's defaults)."""
        return {k: _fmt(v) for k, v in resolve_broker_defaults(self.originals).items()}
