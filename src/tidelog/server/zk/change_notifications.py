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
are not missed). A connection lost within the session (kazoo drops its watchers then, and
fires them once) fails whatever read was under way: as Kafka's client retries its requests
until connected, the listener reads again once kazoo is connected, and a change counts as
read only once its handlers had it, so neither the watch nor a change is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.protocol.states import KazooState

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
        self._lock = threading.Lock()  # guards _last and _armed
        self._processing = threading.Lock()  # one reader of the notifications at a time

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
        except ConnectionClosedError:
            log.debug("config change while the ZooKeeper session closes")
        except ConnectionLoss:
            log.info("config change notifications: connection lost, read again once connected")
            self._again_when_connected()
        except SessionExpiredError:
            log.debug("config change in an expired session (the new session reads all)")
        except Exception:
            log.exception("processing config change notifications failed")

    def _again_when_connected(self) -> None:
        """Read the notifications (and set the watch) again once kazoo is connected: at its
        next CONNECTED, or now if it is connected already."""
        client = self.zk.zk

        def connected(state: KazooState) -> bool:
            if state != KazooState.CONNECTED:
                return False
            client.handler.spawn(self._on_change)
            return True  # once

        client.add_listener(connected)
        if client.state == KazooState.CONNECTED and connected in client.state_listeners:
            client.remove_listener(connected)
            client.handler.spawn(self._on_change)

    def _process(self) -> None:
        with self._processing:
            with self._lock:
                changes = sorted(self.zk.get_children(z.CONFIG_CHANGES_PATH, self._on_change))
                new = [c for c in changes if c > self._last]
            for change in new:
                self._apply(change)  # a lost connection raises: the change is read again
                with self._lock:
                    self._last = max(self._last, change)
            if new:
                self.zk.purge_obsolete_notifications(z.CONFIG_CHANGES_PATH, changes,
                                                     CHANGE_EXPIRATION_MS)

    def _apply(self, change: str) -> None:
        data, _ = self.zk.get_data(f"{z.CONFIG_CHANGES_PATH}/{change}")
        if not data:
            return  # purged in between
        try:
            entity_type, name = z.decode_config_change(data)
        except (ValueError, KeyError, TypeError) as exc:  # skipped, as Kafka logs and goes on
            log.error("ignoring change notification %s: %r (%s)", change, data, exc)
            return
        for h in list(self.handlers):
            if h.entity_type == entity_type:
                try:
                    h.changed(name)
                except (ConnectionClosedError, ConnectionLoss, SessionExpiredError):
                    raise
                except Exception:
                    log.exception("applying the change of %s/%s failed", entity_type, name)
