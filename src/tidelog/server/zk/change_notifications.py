"""Kafka's ZkConfigManager / ZkNodeChangeNotificationListener for the entity types a broker
applies itself: every broker watches ``/config/changes``, reads each new
``config_change_<seq>`` (``{"version":2,"entity_path":"<type>/<name>"}``, or version 1's
entity_type and entity_name) once, and hands the entity's name to the handler of its type
(``brokers``: the dynamic broker configs, ``users`` / ``clients`` / ``ips``: the client
quotas). Watches fire on kazoo's thread: a handler reads ZooKeeper there and hands what must
touch the broker to its loop.

Notifications older than 15 minutes are deleted once newer ones were read (Kafka's
purgeObsoleteNotifications), so ``/config/changes`` does not grow without end.

A watch is one-shot and a session expiry takes every watch with it: ``load`` re-arms it and
asks every handler to read its entities whole (changes announced while the session was gone
are not missed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss

from . import data as z
from .client import KafkaZkClient

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkConfigManager changeExpirationMs


@dataclass(frozen=True)
class ConfigHandler:
    """What a component does with a change of one of its entities, and how it reads them
    all again."""

    entity_type: str
    changed: Callable[[str], None]  # the entity's (sanitized) name, e.g. "alice/clients/app"
    reload: Callable[[], None]


class ConfigChangeListener:
    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk
        self.handlers: list[ConfigHandler] = []
        self._last = ""
        self._lock = threading.Lock()  # one reader of the sequence at a time

    def add_handler(self, handler: ConfigHandler) -> None:
        self.handlers.append(handler)

    def load(self) -> None:
        """Arm the watch and read every handler's entities (start-up, a new session)."""
        with self._lock:
            changes = self.zk.get_children(z.CONFIG_CHANGES_PATH, self._on_change)
            self._last = max(changes) if changes else ""
        for h in self.handlers:
            h.reload()

    def _on_change(self, _event: Any = None) -> None:
        try:
            self._process()
        except (ConnectionClosedError, ConnectionLoss):
            log.debug("config change while the ZooKeeper session closes")
        except Exception:
            log.exception("processing config change notifications failed")

    def _process(self) -> None:
        with self._lock:
            changes = sorted(self.zk.get_children(z.CONFIG_CHANGES_PATH, self._on_change))
            new = [c for c in changes if c > self._last]
            if new:
                self._last = new[-1]
        for change in new:
            data, _ = self.zk.get_data(f"{z.CONFIG_CHANGES_PATH}/{change}")
            if not data:
                continue  # purged in between
            entity_type, name = z.decode_config_change(data)
            for h in self.handlers:
                if h.entity_type == entity_type:
                    try:
                        h.changed(name)
                    except (ConnectionClosedError, ConnectionLoss):
                        raise
                    except Exception:
                        log.exception("applying the change of %s/%s failed", entity_type, name)
        if new:
            self.zk.purge_obsolete_notifications(z.CONFIG_CHANGES_PATH, changes, CHANGE_EXPIRATION_MS)
