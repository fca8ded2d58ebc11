"""Plugs the share coordinator and the share-partition leaders' persister into the broker.

``start_share_coordinator(broker)`` (after the group coordinator started) gives the group
coordinator's share side its ``ShareStateCoordinator`` over ``__share_group_state`` (every
partition owned at once on one broker, loaded as leadership arrives in a cluster) and its
``StatePersister``, and registers it with the coordinator runtime for
``__share_group_state``; ``stop_share_coordinator`` stops the writes in flight and closes the
persister's connections.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster_node import inter_broker_security
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.log_store import LogOffsetsStore
from tidelog.server.coordinator.group.share.persister import StatePersister
from tidelog.server.coordinator.group.share.records import SHARE_STATE_TOPIC
from tidelog.server.coordinator.group.share.shard import ShareCoordinatorShard
from tidelog.server.coordinator.group.share.state_coordinator import ShareStateCoordinator
from tidelog.server.coordinator.host import CoordinatorHost
from tidelog.server.coordinator.runtime import CoordinatorRuntime

if TYPE_CHECKING:
    from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator
    from tidelog.server.metadata.admin import AdminManager

_CLOSING: set[asyncio.Task[None]] = set()


class ShareHost(CoordinatorHost, Protocol):
    @property
    def admin_manager(self) -> AdminManager: ...


def share_state_topic_configs(config: GroupConfig) -> dict[str, str]:
    """Kafka's ShareCoordinatorService topic configs: compacted, min ISR of its own."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
        "min.insync.replicas": str(config.share_coordinator_state_topic_min_isr),
    }


async def state_replicated(state: ShareStateCoordinator, partition: int) -> ErrorCode:
    """In a cluster: NONE once the ISR has ``partition``'s share state writes so far (they
    are committed then; on an error they are reverted), else the coordinator's error."""
    store = state.store
    appender = store.replicated if isinstance(store, LogOffsetsStore) else None
    if appender is None:
        return ErrorCode.NONE
    up_to = appender.pending.get(partition)  # what the wait below covers
    error = await appender.replicated(partition)
    state.complete(partition, up_to, error == ErrorCode.NONE)
    return error


def start_share_coordinator(broker: ShareHost) -> None:
    coord = broker.group_coordinator
    if coord is None:
        return
    cfg, rm = coord.config, broker.replica_manager
    n = cfg.share_coordinator_state_topic_num_partitions
    store = LogOffsetsStore(rm, cfg, SHARE_STATE_TOPIC, n)

    def exists(topic_id: uuid.UUID, partition: int) -> bool:
        topic = rm.metadata_cache.image.topic_by_id(topic_id)
        return topic is not None and partition in topic.partitions

    state = ShareStateCoordinator(store, n, broker.clock, partition_exists=exists)
    state.confirm_writes = store.replicated is not None  # reads see replicated states
    share = coord.share
    share.state_coordinator = state
    broker.coordinator_runtime.register(SHARE_STATE_TOPIC, ShareCoordinatorShard(state))

    async def replicated(partition: int) -> ErrorCode:
        return await state_replicated(state, partition)

    async def ensure_topic() -> bool:
        return await broker.admin_manager.ensure_internal_topic(
            SHARE_STATE_TOPIC, n, share_state_topic_configs(cfg),
            cfg.share_coordinator_state_topic_replication_factor)

    config = broker.config
    share.durable.persister = StatePersister(
        config.node_id, rm.metadata_cache, config.inter_broker_listener_name,
        None if rm.one_broker else inter_broker_security(config), num_partitions=n,
        local=lambda: share.state_coordinator, replicated=replicated,
        ensure_topic=ensure_topic)
    if not rm.one_broker:
        return  # in a cluster: each partition loads when this broker becomes its leader
    if rm.topic(SHARE_STATE_TOPIC) is None:
        for p in range(n):
            state.partitions.activate(p)
    else:
        for p in range(n):
            state.load_now(p)


def stop_share_coordinator(share: ShareGroupCoordinator, runtime: CoordinatorRuntime) -> None:
    runtime.unregister(SHARE_STATE_TOPIC)
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
