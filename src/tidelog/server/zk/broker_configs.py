"""Dynamic broker configs of a ZooKeeper cluster, where Kafka keeps them: the cluster
default in ``/config/brokers/<default>``, a broker's own in ``/config/brokers/<id>``
(``{"version":1,"config":{...}}``, AdminZkClient.changeBrokerConfig), each change announced
under ``/config/changes`` (``brokers/<default>``, ``brokers/<id>``).

An AlterConfigs / IncrementalAlterConfigs on a BROKER resource, accepted by any broker for
the cluster default and by the broker itself for its own id (Kafka 3.x's ZkAdminManager
refuses another broker's id with INVALID_REQUEST; the admin client sends a broker's configs
to that broker), is validated, written to ZooKeeper and applied here at once; every other
broker applies it when it reads the notification (the default on all of them, a broker's
own only on that broker). A broker starting reads both znodes before it serves.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig

from ..dynamic_config import DEFAULT, DynamicBrokerConfig
from .change_notifications import ConfigHandler
from .client import KafkaZkClient

if TYPE_CHECKING:
    from tidelog.storage.manager import LogManager

BROKERS = "brokers"
DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default


def zk_entity(name: str) -> str:
    """The znode name of a BROKER resource name ("" is the cluster default)."""
    return DEFAULT_ENTITY if name == DEFAULT else name


class ZkDynamicBrokerConfig(DynamicBrokerConfig):
    def __init__(self, config: BrokerConfig, logs: LogManager, zk: KafkaZkClient,
                 loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self.zk = zk
        self.loop = loop
        super().__init__(config, logs)

    def _read_stored(self) -> tuple[dict[str, str], dict[str, str]]:
        return (self.zk.get_entity_configs(BROKERS, DEFAULT_ENTITY),
                self.zk.get_entity_configs(BROKERS, self.node))  # fmt: skip

    def entity(self, name: str) -> dict[str, str]:
        """The entity's configs as ZooKeeper holds them now (an incremental change applies
        to those, as Kafka's ZkAdminManager reads them, not to what this broker has seen)."""
        super().entity(name)
        return self.zk.get_entity_configs(BROKERS, zk_entity(name))

    def _persist(self, name: str, new: dict[str, str]) -> None:
        self.zk.set_or_create_entity_configs(BROKERS, zk_entity(name), new)

    def handler(self) -> ConfigHandler:
        return ConfigHandler(BROKERS, self._changed, self._reload_all)

    def _changed(self, entity: str) -> None:
        """kazoo's thread: read the entity if it is ours, apply it on the loop."""
        name = DEFAULT if entity == DEFAULT_ENTITY else entity
        if name not in (DEFAULT, self.node):
            return  # another broker's own configs
        stored = self.zk.get_entity_configs(BROKERS, entity)
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.reload, name, stored)

    def _reload_all(self) -> None:
        for entity in (DEFAULT_ENTITY, self.node):
            self._changed(entity)

