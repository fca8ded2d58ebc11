"""Dynamic broker configs (Kafka's DynamicBrokerConfig: its DynamicLogConfig and LogCleaner
parts): log defaults and log cleaner settings altered on the BROKER resource, per broker
(resource name = this broker's id) or as the cluster default (empty name), persisted in
``broker-configs.json`` in the first log dir (in a ZooKeeper cluster, in ``/config/brokers``:
zk/broker_configs.py) and applied live as Kafka applies them: log
defaults to every partition without a topic override, cleaner settings by
LogCleaner.reconfigure (the I/O throttle at once; the threads restarted, as many as
``log.cleaner.threads``, each with its share of the dedupe and I/O buffers for its next
cleaning), validated first as LogCleaner.validateReconfiguration does.

Precedence, as in Kafka: per-broker dynamic > cluster-default dynamic > server.properties /
--override (static) > Kafka's default. Broker keys outside the dynamic set are refused with
INVALID_REQUEST ("Cannot update these configs dynamically"), as Kafka's
DynamicBrokerConfig.validateConfigs does for read-only keys; a key that is no broker config
at all (a topic config's name, a typo) is stored and has no effect, as in Kafka, which
refuses only the known keys it cannot change (its ``nonDynamicProps``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.config.broker_config import BROKER_CONFIG_DEF, BrokerConfig
from tidelog.config.log_config import BROKER_SYNONYMS
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.checkpoints import write_atomically
from tidelog.storage.cleaner.config import CLEANER_CONFIG_DEF, CleanerConfig

from .errors import ApiError

if TYPE_CHECKING:
    from tidelog.storage.cleaner.log_cleaner import LogCleaner
    from tidelog.storage.manager import LogManager

log = logging.getLogger(__name__)

DYNAMIC_CONFIGS_FILE = "broker-configs.json"
DEFAULT = ""  # the cluster-default entity's resource name
# Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of topic configs
# Kafka's LogCleaner.ReconfigurableConfigs
CLEANER_KEYS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "message.max.bytes",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
})
# Kafka's DynamicConfig.Broker replication throttles (read live by the replication quotas)
REPLICATION_THROTTLE_KEYS = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
})
DYNAMIC_KEYS = frozenset(syn for syns in BROKER_SYNONYMS.values() for syn, _ in syns) | {
    name for name in ("compression.type", "min.insync.replicas",
                      "unclean.leader.election.enable") if name in BROKER_CONFIG_DEF.keys
} | CLEANER_KEYS | REPLICATION_THROTTLE_KEYS


def _is_broker_key(name: str) -> bool:
    return name in BROKER_CONFIG_DEF.keys or name in CLEANER_CONFIG_DEF.keys


class DynamicBrokerConfig:
    """Reads its file and applies it when built (``Broker.start``, once the logs are open)."""

    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        self.config = config
        self.logs = logs
        self.node = str(config.node_id)
        self.static: dict[str, Any] = dict(config.originals)
        self.path = Path(config.log_dirs[0]) / DYNAMIC_CONFIGS_FILE
        # told the broker's values after each change (Kafka's Reconfigurables), on the loop
        self.listeners: list[Callable[[Mapping[str, Any]], None]] = []
        default, mine = self._read_stored()
        self.layers: dict[str, dict[str, str]] = {DEFAULT: default, self.node: mine}
        if self.layers[DEFAULT] or self.layers[self.node]:
            self._apply()

    def _read_stored(self) -> tuple[dict[str, str], dict[str, str]]:
        """The stored (cluster default, this broker's) dynamic configs."""
        if not self.path.exists():
            return {}, {}
        stored = json.loads(self.path.read_bytes())
        return dict(stored.get("default", {})), dict(stored.get("brokers", {}).get(self.node, {}))

    def _persist(self, name: str, new: dict[str, str]) -> None:
        """Store the entity's new configs (before they apply)."""
        layers = {**self.layers, name: new}
        doc = {"default": layers[DEFAULT], "brokers": {self.node: layers[self.node]}}
        write_atomically(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def reload(self, name: str, stored: dict[str, str]) -> None:
        """Configs of an entity changed elsewhere (another broker wrote them): they apply
        here as they would have if altered here; invalid ones are logged and ignored, as
        Kafka's DynamicBrokerConfig does with a bad update."""
        if name not in self.layers or stored == self.layers[name]:
            return
        known = {k: v for k, v in stored.items() if k in DYNAMIC_KEYS}
        try:
            self._validate(name, known)
        except ApiError as exc:
            log.error("dynamic broker configs of %r not applied: %s", name or "<default>", exc)
            return
        self.layers[name] = known
        self._apply()

    def entity(self, name: str) -> dict[str, str]:
        if name not in (DEFAULT, self.node):
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Unexpected broker id, expected {self.node}, but received {name}")
        return self.layers[name]

    def alter(self, name: str, new: dict[str, str], validate_only: bool) -> None:
        """Replace the entity's dynamic configs with ``new`` (validated first)."""
        self.entity(name)
        refused = sorted(k for k in new if k not in DYNAMIC_KEYS and _is_broker_key(k))
        if refused:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Cannot update these configs dynamically: {set(refused)}")
        self._validate(name, new)
        if validate_only:
            return
        self._persist(name, dict(new))
        self.layers[name] = dict(new)
        self._apply()

    def _validate(self, name: str, new: dict[str, str]) -> None:
        trial = {**self.static, **(self.layers[DEFAULT] if name != DEFAULT else new),
                 **(self.layers[self.node] if name != self.node else new)}
        try:
            # each new value itself, as Kafka's DynamicConfig.Broker.validate: in the trial a
            # value of the other layer (a broker's own over the default) may hide it
            for key, value in new.items():
                k = BROKER_CONFIG_DEF.keys.get(key) or CLEANER_CONFIG_DEF.keys.get(key)
                if k is not None:
                    k.parse(value)
            BROKER_CONFIG_DEF.parse(trial)
            self._validate_cleaner(trial)
        except Exception as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def _cleaner(self) -> LogCleaner | None:
        return self.logs.cleaner

    def _validate_cleaner(self, props: dict[str, Any]) -> None:
        """Only when the cleaner's settings change, as Kafka validates a reconfigurable."""
        new = CleanerConfig.from_props(props)
        cleaner = self._cleaner()
        if cleaner is not None and new != cleaner.target_config:
            cleaner.validate_reconfiguration(new)

    def effective(self) -> dict[str, Any]:
        """The static configs under the dynamic ones that apply (a stored key that is no
        broker config applies to nothing)."""
        dynamic = {**self.layers[DEFAULT], **self.layers[self.node]}
        return {**self.static, **{k: v for k, v in dynamic.items() if k in DYNAMIC_KEYS}}

    def _apply(self) -> None:
        """The new values become the broker's; every log without a topic override of them
        takes them at once."""
        config = self.config
        config.originals.clear()
        config.originals.update(self.effective())
        values = BROKER_CONFIG_DEF.parse(config.originals)
        values["node.id"] = config.values["node.id"]  # read-only; broker.id's alias resolved once
        config.values = values
        self.logs.update_broker_log_defaults(
            config.log_config_defaults())
        cleaner = self._cleaner()  # None with log.cleaner.enable=false
        if cleaner is not None:
            new = CleanerConfig.from_props(config.originals)
            if new != cleaner.target_config:  # threads restarted off the event loop
                cleaner.reconfigure_later(new)
        for fn in self.listeners:
            fn(values)


class HasDynamicConfig(Protocol):
    """What ``dynamic_config`` reads (the broker)."""

    @property
    def dynamic_config(self) -> DynamicBrokerConfig | None: ...


def dynamic_config(broker: HasDynamicConfig) -> DynamicBrokerConfig:
    """The broker's dynamic configs (built by ``Broker.start``, applied before serving)."""
    found = broker.dynamic_config
    if found is None:
        raise RuntimeError("the broker has not started: no dynamic configs yet")
    return found
