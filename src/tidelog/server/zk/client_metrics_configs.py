"""Client metrics subscriptions in a cluster: kept in ZooKeeper as every other entity config
(``/config/client-metrics/<name>``, Kafka's config JSON), announced under ``/config/changes``
(``client-metrics/<name>``) and applied by every broker, so a subscription altered through
any broker reaches clients wherever they push. Kafka keeps these in KRaft metadata only;
tidelog's cluster metadata is ZooKeeper, so they live where its other configs do.

Notifications arrive on kazoo's thread, the broker's own writes on its event loop: one
update at a time reads ZooKeeper and replaces the mapping whole (then moves ``version``),
so a slower read never puts back what a newer one replaced; the event loop reads the
mapping without a lock. When ZooKeeper cannot be read (at first use, or a new session),
the store tries again at most once a second as requests and scrapes come.
"""

from __future__ import annotations

import logging
import threading

from kazoo.exceptions import NoNodeError

from tidelog.server.errors import ApiError

from ..telemetry.configs import ClientMetricsConfigStore, validate
from .change_notifications import ConfigHandler, ZkNodeChangeNotificationListener
from .client import KafkaZkClient

log = logging.getLogger(__name__)

CLIENT_METRICS_CONFIG_TYPE = "client-metrics"


RETRY_MS = 1000


class ZkClientMetricsConfigStore(ClientMetricsConfigStore):
    def __init__(self, zk: KafkaZkClient) -> None:
        super().__init__()
        self.zk = zk
        self.loaded = False
        self._changes: ZkNodeChangeNotificationListener | None = None
        self._tried_ms = -RETRY_MS
        self._update = threading.Lock()  # one reader-and-replacer of the mapping at a time

    def watch(self, changes: ZkNodeChangeNotificationListener, now_ms: int) -> None:
        """Read the subscriptions and follow their change notifications (the handler reads
        them whole again with every new ZooKeeper session)."""
        self._changes = changes
        changes.add_handler(self.handler())
        self._tried_ms = now_ms
        self._arm()

    def _arm(self) -> None:
        assert self._changes is not None
        self.loaded = False
        try:
            self._changes.arm()
            self.load()
        except Exception as exc:
            log.warning("client metrics subscriptions not read from ZooKeeper yet: %s", exc)

    def ensure_loaded(self, now_ms: int) -> None:
        if not self.loaded and self._changes is not None and now_ms - self._tried_ms >= RETRY_MS:
            self._tried_ms = now_ms
            self._arm()

    def handler(self) -> ConfigHandler:
        return ConfigHandler(CLIENT_METRICS_CONFIG_TYPE, self.refresh, self._arm)

    def attach(self, log_dir: object) -> None:
        """Nothing on disk: ZooKeeper holds the subscriptions (``load`` reads them)."""

    def load(self) -> None:
        with self._update:
            configs = {}
            for name in self.zk.get_children(f"/config/{CLIENT_METRICS_CONFIG_TYPE}"):
                props = self._read(name)
                if props:
                    configs[name] = props
            self.configs = configs
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
        """AdminZkClient.changeEntityConfig: write (an emptied one goes), announce, re-read."""
        if props:
            self.zk.set_or_create_entity_configs(CLIENT_METRICS_CONFIG_TYPE, name, props,
                                                 notify=False)
        else:
            try:
                self.zk.zk.delete(f"/config/{CLIENT_METRICS_CONFIG_TYPE}/{name}")
            except NoNodeError:
                pass
        self.zk.create_config_change_notification(f"{CLIENT_METRICS_CONFIG_TYPE}/{name}")
        self.refresh(name)

    def _save(self) -> None:
        """Written to ZooKeeper by ``_store``."""
