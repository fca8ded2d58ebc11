"""This broker's registration in ZooKeeper and what follows its session (Kafka's
KafkaZkClient.registerBroker and the session's StateChangeHandler).

``register`` writes ``/brokers/ids/<id>`` (its czxid is the broker epoch). Losing the
session (expiry) is told at once (``on_lost``, on kazoo's thread); when a new session
replaces it, ``register_again`` writes the top-level paths and the registration again (a new
epoch) and runs ``on_new_session``: the watches of the old session went with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.client import KazooState

from .client import KafkaZkClient
from .data import BrokerRegistration

log = logging.getLogger(__name__)


class ZkBrokerRegistration:
    def __init__(self, zk: KafkaZkClient, broker_id: int,
                 registration: Callable[[], BrokerRegistration]) -> None:  # fmt: skip
        self.zk = zk
        self.broker_id = broker_id
        self.registration = registration
        self.broker_epoch = -1
        self._session_lost = False
        # run (off the loop) once a new session replaces an expired one: watches of the
        # metadata store, ACLs and credentials went with the old session
        self.on_new_session: list[Callable[[], object]] = []

    async def register(self) -> None:
        self.broker_epoch = await asyncio.to_thread(self.zk.register_broker, self.registration())
        log.info("broker %d registered in ZooKeeper (epoch %d)", self.broker_id, self.broker_epoch)

    async def register_again(self) -> None:
        """A new session after an expiry: register with a new epoch, re-arm the watches."""
        await asyncio.to_thread(self.zk.create_top_level_paths)
        await self.register()
        for fn in self.on_new_session:
            await asyncio.to_thread(fn)

    def watch_session(self, active: Callable[[], bool], on_lost: Callable[[], None],
                      on_new: Callable[[], None]) -> None:  # fmt: skip
        """kazoo's thread: while ``active()``, ``on_lost`` when the session expires,
        ``on_new`` when a new session is connected after that."""

        def on_state(state: str) -> None:
            if not active():
                return
            if state == KazooState.LOST:
                self._session_lost = True
                on_lost()
            elif state == KazooState.CONNECTED and self._session_lost:
                self._session_lost = False
                on_new()

        self.zk.add_state_listener(on_state)
