"""Client metrics subscriptions in a cluster: kept in ZooKeeper as every other entity config
(``/config/client-metrics/<name>``, Kafka's config JSON), announced under ``/config/changes``
(``client-metrics/<name>``) and applied by every broker, so a subscription altered through
any broker reaches clients wherever they push. Kafka keeps these in KRaft metadata only;
tidelog's cluster metadata is ZooKeeper, so they live where its other configs do.

Notifications arrive on kazoo's thread, the broker's own writes on its event loop: one
update at a time reads ZooKeeper and replaces the mapping whole (then moves ``version``),
so a slower read never puts back what a newer one replaced; the event loop reads the
mapping without a lock. How the store follows ZooKeeper is config_follower.py's.
"""

from __future__ import annotations

import logging
import threading

from tidelog.server.errors import ApiError

from ..telemetry.configs import ClientMetricsConfigStore, validate
from .client import KafkaZkClient
from .config_follower import ZkConfigFollower

log = logging.getLogger(__name__)

CLIENT_METRICS_CONFIG_TYPE = "client-metrics"


class ZkClientMetricsConfigStore(ZkConfigFollower, ClientMetricsConfigStore):
    entity_type = CLIENT_METRICS_CONFIG_TYPE

    def __init__(self, zk: KafkaZkClient) -> None:
        super().__init__()
        self.zk = zk
        self._update = threading.Lock()  # one reader-and-replacer of the mapping at a time

    def attach(self, log_dir: object) -> None:
        """Nothing on disk: ZooKeeper holds the subscriptions (``load`` reads them)."""

    def load(self) -> None:
        with self._update:
            self.configs = self._read_all()
            self.version += 1
            self.loaded = True

    def _read(self, name: str) -> dict[str, str]:
        props = self.zk.get_entity_configs(CLIENT_METRICS_CONFIG_TYPE, name)
        try:
            validate(name, props)
        except ApiError as exc:
            log.error("ignoring client metrics subscription %r: %s", name, exc)
            return {}
        return props

    def refresh(self, name: str) -> None:
        """One subscription changed (a notification, or our own write): read it again."""
        with self._update:
            props = self._read(name)
            configs = dict(self.configs)
            if props:
                configs[name] = props
            else:
                configs.pop(name, None)
            self.configs = configs
            self.version += 1

    def current(self, name: str) -> dict[str, str]:
        """What ZooKeeper holds now (another broker may have changed it)."""
        return self.zk.get_entity_configs(CLIENT_METRICS_CONFIG_TYPE, name)

    def _store(self, name: str, props: dict[str, str]) -> None:
        self._write(name, props)

    def _save(self) -> None:
        """Written to ZooKeeper by ``_store``."""
