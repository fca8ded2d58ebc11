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

A broker that ran on its own kept them in ``group-configs.json`` in its first log dir: in a
cluster, ``migrate`` moves that file's entries into ZooKeeper once (an entry ZooKeeper holds
already wins) and renames the file ``group-configs.json.migrated``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.group_configs import (
    GROUP_CONFIGS_FILE,
    KEYS,
    GroupConfigStore,
)
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

    def attach(self, log_dir: str | Path) -> None:
        """ZooKeeper holds the group configs (``load`` reads them); the ``group-configs.json``
        this broker kept in ``log_dir`` on its own before moves in (``migrate``)."""
        try:
            self.migrate(Path(log_dir) / GROUP_CONFIGS_FILE)
        except Exception as exc:  # ZooKeeper unreachable: the next attach moves them
            log.warning("group configs of %s not moved into ZooKeeper yet: %s", log_dir, exc)

    def migrate(self, path: Path) -> int:
        """Move the entries of a one-broker store's file (``path``) that ZooKeeper does not
        hold into it, announced to every broker; then rename the file so they are not moved
        again. Returns how many entries moved."""
        try:
            stored = json.loads(path.read_bytes())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            log.error("not moving the group configs of unreadable %s: %s", path, exc)
            return 0
        moved = 0
        for group, configs in stored.items() if isinstance(stored, dict) else ():
            if isinstance(configs, dict):
                moved += self._migrate_group(str(group), configs)
        path.rename(path.with_name(path.name + ".migrated"))
        log.info("moved %d group config entries of %s into ZooKeeper", moved, path)
        return moved

    def _migrate_group(self, group_id: str, configs: dict[str, object]) -> int:
        name = sanitize(group_id)
        there = self.zk.get_entity_configs(GROUP_CONFIG_TYPE, name)
        new = {}
        for key_name, value in configs.items():
            key = KEYS.get(key_name)
            if key is None or key_name in there:  # unknown here, or ZooKeeper's wins
                continue
            try:
                new[key_name] = self._checked(key_name, key, str(value))
            except ApiError as exc:
                log.error("not moving group config of %r: %s", group_id, exc)
        if new:
            self._write(name, {**there, **new})
        return len(new)

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
