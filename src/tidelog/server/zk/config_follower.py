"""What a store of one entity type's configs in ZooKeeper (client metrics subscriptions,
group configs) does to read them and follow them: its handler on the broker's one watch of
``/config/changes`` (change_notifications.py) hands it each changed entity (``refresh``) and,
with every new session, has it read them all again (``load``). When ZooKeeper cannot be read
(at first use, or a new session), the store tries again at most once a second as requests
come (``ensure_loaded``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError

from .change_notifications import ConfigHandler, ZkNodeChangeNotificationListener

if TYPE_CHECKING:
    from .client import KafkaZkClient

log = logging.getLogger(__name__)

RETRY_MS = 1000


class ZkConfigFollower:
    entity_type = ""  # the entity's type in /config/changes, e.g. "groups"
    zk: KafkaZkClient
    loaded = False
    _changes: ZkNodeChangeNotificationListener | None = None
    _tried_ms = -RETRY_MS

    def load(self) -> None:
        """Read every entity of the type (and set ``loaded``)."""
        raise NotImplementedError

    def refresh(self, name: str) -> None:
        """One entity changed: read it again."""
        raise NotImplementedError

    def _read(self, name: str) -> dict[str, str]:
        """One entity's stored configs that are valid here ({}: none)."""
        raise NotImplementedError

    def _read_all(self) -> dict[str, dict[str, str]]:
        """Every entity of the type with valid configs, by its znode name."""
        out = {}
        for name in self.zk.get_children(f"/config/{self.entity_type}"):
            props = self._read(name)
            if props:
                out[name] = props
        return out

    def _write(self, name: str, props: dict[str, str]) -> None:
        """AdminZkClient.changeEntityConfig: write (an emptied one goes), announce, re-read."""
        if props:
            self.zk.set_or_create_entity_configs(self.entity_type, name, props, notify=False)
        else:
            try:
                self.zk.zk.delete(f"/config/{self.entity_type}/{name}")
            except NoNodeError:
                pass
        self.zk.create_config_change_notification(f"{self.entity_type}/{name}")
        self.refresh(name)

    def handler(self) -> ConfigHandler:
        return ConfigHandler(self.entity_type, self.refresh, self._arm)

    def watch(self, changes: ZkNodeChangeNotificationListener, now_ms: int) -> None:
        """Read the entities and follow their change notifications."""
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
            log.warning("%s configs not read from ZooKeeper yet: %s", self.entity_type, exc)

    def ensure_loaded(self, now_ms: int) -> None:
        if not self.loaded and self._changes is not None and now_ms - self._tried_ms >= RETRY_MS:
            self._tried_ms = now_ms
            self._arm()
