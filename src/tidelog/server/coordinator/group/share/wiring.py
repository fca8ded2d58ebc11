"""Plugs share groups into the broker: the share coordinator they persist to and the
share-partition leaders' persister.

``start_share_coordinator(broker)`` (after the group coordinator started) starts the share
coordinator (``coordinator/share``) over ``__share_group_state`` and gives the group
coordinator's share side its ``ShareStateCoordinator`` and its ``StatePersister``;
``stop_share_coordinator`` unregisters the share coordinator, stops the writes in flight and
closes the persister's connections.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.log_store import LogOffsetsStore
from tidelog.server.coordinator.group.share.persister import StatePersister
from tidelog.server.coordinator.host import CoordinatorHost
from tidelog.server.coordinator.runtime import CoordinatorRuntime
from tidelog.server.coordinator.share import wiring as share_coordinator
from tidelog.server.coordinator.share.records import SHARE_STATE_TOPIC
from tidelog.server.security.inter_broker import inter_broker_security

if TYPE_CHECKING:
    from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator
    from tidelog.server.metadata.admin import AdminManager

_CLOSING: set[asyncio.Task[None]] = set()


class ShareHost(CoordinatorHost, Protocol):
    @property
    def admin_manager(self) -> AdminManager: ...


def start_share_coordinator(broker: ShareHost) -> None:
    coord = broker.group_coordinator
    if coord is None:
        return
    cfg, rm = coord.config, broker.replica_manager
    n = cfg.share_coordinator_state_topic_num_partitions
    state = share_coordinator.start_share_coordinator(
        broker, cfg, LogOffsetsStore(rm, cfg, SHARE_STATE_TOPIC, n))
    share = coord.share
    share.state_coordinator = state

    async def replicated(partition: int) -> ErrorCode:
        return await share_coordinator.state_replicated(state, partition)

    async def ensure_topic() -> bool:
        return await broker.admin_manager.ensure_internal_topic(
            SHARE_STATE_TOPIC, n, share_coordinator.share_state_topic_configs(cfg),
            cfg.share_coordinator_state_topic_replication_factor)

    config = broker.config
    share.durable.persister = StatePersister(
        config.node_id, rm.metadata_cache, config.inter_broker_listener_name,
        None if rm.one_broker else inter_broker_security(config), num_partitions=n,
        local=lambda: share.state_coordinator, replicated=replicated,
        ensure_topic=ensure_topic)


def stop_share_coordinator(share: ShareGroupCoordinator, runtime: CoordinatorRuntime) -> None:
    share_coordinator.stop_share_coordinator(runtime)
    persister = share.durable.persister
    share.durable.close()
    share.durable.persister = None
    share.state_coordinator = None
    if persister is not None:
        try:
            task = asyncio.get_running_loop().create_task(persister.close())
        except RuntimeError:
            return  # no loop any more: the connections went with it
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)
