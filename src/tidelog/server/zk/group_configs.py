"""Group configs in a cluster: kept in ZooKeeper as every other entity config
(``/config/groups/<group>``, Kafka's config JSON, the group id sanitized as Kafka's Sanitizer
does for users and client ids), announced under ``/config/changes`` (``groups/<group>``) and
applied by every broker, so a group config altered through any broker reaches the group's
coordinator and the share-partition leaders wherever they are, and outlives restarts. Kafka
keeps them in its KRaft metadata; tidelog's cluster metadata is ZooKeeper, so they live where
its other entity configs do.

Notifications arrive on kazoo's thread, the broker's own writes on its event loop: one update
at a time reads ZooKeeper and replaces the mapping whole, so a slower read never puts back
what a newer one replaced; the event loop reads the mapping without a lock. How the store
follows ZooKeeper is config_follower.py's.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.group_configs import KEYS, GroupConfigStore
from tidelog.server.errors import ApiError

from .client import KafkaZkClient
from .config_follower import ZkConfigFollower
from .credentials import desanitize, sanitize

log = logging.getLogger(__name__)

GROUP_CONFIG_TYPE = "groups"


class ZkGroupConfigStore(ZkConfigFollower, GroupConfigStore):
    entity_type = GROUP_CONFIG_TYPE

    def __init__(self, zk: KafkaZkClient, config: GroupConfig) -> None:
        super().__init__(config)
        self.zk = zk
        self._update = threading.Lock()  # one reader-and-replacer of the mapping at a time

    @property
    def attached(self) -> bool:
        return True

    def attach(self, log_dir: object) -> None:
        """Nothing on disk: ZooKeeper holds the group configs (``load`` reads them)."""

    def load(self) -> None:
        with self._update:
            self.overrides = {desanitize(n): props for n, props in self._read_all().items()}
            self.loaded = True

    def _read(self, sanitized: str) -> dict[str, str]:
        """The group's stored configs that are valid here (a bad one is logged and left)."""
        out = {}
        for name, value in self.zk.get_entity_configs(GROUP_CONFIG_TYPE, sanitized).items():
            key = KEYS.get(name)
            if key is None:
                log.error("ignoring group config of %r: unknown name %s", desanitize(sanitized),
                          name)
                continue
            try:
                out[name] = self._checked(name, key, value)
            except ApiError as exc:
                log.error("ignoring group config of %r: %s", desanitize(sanitized), exc)
        return out

    def refresh(self, sanitized: str) -> None:
        """One group's configs changed (a notification, or our own write): read them again."""
        with self._update:
            props = self._read(sanitized)
            overrides = dict(self.overrides)
            if props:
                overrides[desanitize(sanitized)] = props
            else:
                overrides.pop(desanitize(sanitized), None)
            self.overrides = overrides

    async def reread(self, group_id: str) -> None:
        try:
            await asyncio.to_thread(self.refresh, sanitize(group_id))
        except Exception as exc:  # ZooKeeper unreachable: what was read before stands
            log.warning("group configs of %r not read again: %s", group_id, exc)

    def current(self, group_id: str) -> dict[str, str]:
        """What ZooKeeper holds now (another broker may have changed it)."""
        return self._read(sanitize(group_id))

    def _store(self, group_id: str, new: dict[str, str]) -> None:
        self._write(sanitize(group_id), new)

    def _save(self) -> None:
        """Written to ZooKeeper by ``_store``."""
