"""Kafka's ZkNodeChangeNotificationListener with ZkConfigManager's handlers: the one watch of
``/config/changes`` a broker keeps (made by its ClusterNode, shared by every store that
follows entity configs). It reads each new ``config_change_<seq>``
(``{"version":2,"entity_path":"<type>/<name>"}``, or version 1's entity_type and
entity_name) once, and hands the entity's name to every handler of its type (``topics``:
the topic mirror, ``users``: the SCRAM credentials and the user quotas, ``brokers``: the
dynamic broker configs, ``clients`` / ``ips``: the client quotas, ``client-metrics``: the
client metrics subscriptions). Watches fire on kazoo's thread: a handler reads ZooKeeper
there and hands what must touch the broker to its loop.

A store adds its handler, ``arm``s the watch (the first one sets it) and then reads its
entities whole: a change announced before the handler was added is in that read, one
announced after reaches the handler.

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


class ZkNodeChangeNotificationListener:
    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk
        self.handlers: list[ConfigHandler] = []
        self._last = ""
        self._armed = False
        self._lock = threading.Lock()  # one reader of the sequence at a time

    def add_handler(self, handler: ConfigHandler) -> None:
        self.handlers.append(handler)

    def arm(self) -> None:
        """Set the watch unless it is set: the changes so far are read by whoever arms."""
        with self._lock:
            if not self._armed:
                self._watch()

    def load(self) -> None:
        """Set the watch again and have every handler read its entities whole (a new
        session: the old one's watch went with it)."""
        with self._lock:
            self._watch()
        for h in list(self.handlers):
            h.reload()

    def _watch(self) -> None:
        changes = self.zk.get_children(z.CONFIG_CHANGES_PATH, self._on_change)
        self._last = max(changes) if changes else ""
        self._armed = True

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
            for h in list(self.handlers):
                if h.entity_type == entity_type:
                    try:
                        h.changed(name)
                    except (ConnectionClosedError, ConnectionLoss):
                        raise
                    except Exception:
                        log.exception("applying the change of %s/%s failed", entity_type, name)
        if new:
            self.zk.purge_obsolete_notifications(z.CONFIG_CHANGES_PATH, changes, CHANGE_EXPIRATION_MS)
