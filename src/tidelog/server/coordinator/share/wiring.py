"""Plugs the share coordinator into the broker (Kafka's ShareCoordinatorService): a
``ShareStateCoordinator`` over ``__share_group_state`` (every partition owned at once on one
broker, loaded as leadership arrives in a cluster), registered with the coordinator runtime
for that topic; ``stop_share_coordinator`` unregisters it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch
from tidelog.server.coordinator.partition_writer import PartitionWriter
from tidelog.server.coordinator.runtime import CoordinatorRuntime
from tidelog.server.coordinator.share.records import SHARE_STATE_TOPIC
from tidelog.server.coordinator.share.shard import ShareCoordinatorShard
from tidelog.server.coordinator.share.state_coordinator import ShareStateCoordinator

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager
    from tidelog.util.clock import Clock


class ShareCoordinatorConfig(Protocol):
    """Kafka's ShareCoordinatorConfig: the settings of ``__share_group_state`` (the broker's
    group coordinator config carries them)."""

    @property
    def share_coordinator_state_topic_num_partitions(self) -> int: ...

    @property
    def share_coordinator_state_topic_replication_factor(self) -> int: ...

    @property
    def share_coordinator_state_topic_min_isr(self) -> int: ...

    @property
    def offsets_topic_segment_bytes(self) -> int: ...


class ShareStateStore(Protocol):
    """The partitions of ``__share_group_state`` as byte logs; in a cluster ``replicated``
    writes them acks=all."""

    @property
    def replicated(self) -> PartitionWriter | None: ...

    def append(self, partition: int, batch: bytes) -> int: ...

    def read_batches(self, partition: int) -> Iterator[RecordBatch]: ...


class ShareCoordinatorHost(Protocol):
    """What the share coordinator uses of the broker that hosts it."""

    @property
    def clock(self) -> Clock: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def coordinator_runtime(self) -> CoordinatorRuntime: ...


def share_state_topic_configs(config: ShareCoordinatorConfig) -> dict[str, str]:
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
    writer = state.writer
    if writer is None:
        return ErrorCode.NONE
    up_to = writer.pending.get(partition)  # what the wait below covers
    error = await writer.replicated(partition)
    state.complete(partition, up_to, error == ErrorCode.NONE)
    return error


def start_share_coordinator(host: ShareCoordinatorHost, config: ShareCoordinatorConfig,
                            store: ShareStateStore) -> ShareStateCoordinator:
    """The share coordinator over ``store``, registered with the host's runtime; on one
    broker every partition is owned (loaded) at once."""
    rm = host.replica_manager
    n = config.share_coordinator_state_topic_num_partitions

    def exists(topic_id: uuid.UUID, partition: int) -> bool:
        topic = rm.metadata_cache.image.topic_by_id(topic_id)
        return topic is not None and partition in topic.partitions

    state = ShareStateCoordinator(store, n, host.clock, partition_exists=exists)
    state.writer = store.replicated
    state.confirm_writes = state.writer is not None  # reads see replicated states
    host.coordinator_runtime.register(SHARE_STATE_TOPIC, ShareCoordinatorShard(state))
    if not rm.one_broker:
        return state  # in a cluster: each partition loads when this broker becomes its leader
    if rm.topic(SHARE_STATE_TOPIC) is None:
        for p in range(n):
            state.partitions.activate(p)
    else:
        for p in range(n):
            state.load_now(p)
    return state


def stop_share_coordinator(runtime: CoordinatorRuntime) -> None:
    runtime.unregister(SHARE_STATE_TOPIC)
