"""A cluster member's replication services, built from the broker config and its metadata
cache: the ReplicaFetcherManager (followers) and the AlterPartitionManager (the leader's ISR
changes), both reaching other brokers on the inter-broker listener with its security.

Leaders' and the controller's addresses come from the metadata cache, which the controller's
UpdateMetadata fills before it sends LeaderAndIsr (Kafka's order on failover and broker
start-up); topic ids for Fetch v13+ and AlterPartition from the same image.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelog.client.security import ClientSecurity
from tidelog.util.topic_partition import TopicPartition

from .alter_partition import AlterPartitionManager
from .fetch_state import PartitionLookup
from .leader_endpoint import FetchSettings
from .quota import ReplicationQuotas, replication_quotas
from .replica_fetcher_manager import ReplicaFetcherManager

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.config.log_config import LogConfig

    from ..metadata.cache import MetadataCache

log = logging.getLogger(__name__)


def fetch_settings(config: BrokerConfig) -> FetchSettings:
    v = config.values
    return FetchSettings(
        replica_id=config.node_id,
        max_wait_ms=int(v["replica.fetch.wait.max.ms"]),
        min_bytes=int(v["replica.fetch.min.bytes"]),
        response_max_bytes=int(v["replica.fetch.response.max.bytes"]),
        partition_max_bytes=int(v["replica.fetch.max.bytes"]),
        socket_timeout_ms=int(v["replica.socket.timeout.ms"]),
        backoff_ms=int(v["replica.fetch.backoff.ms"]),
        truncate_on_fetch=True,  # our leaders answer Fetch v12+ diverging epochs
        fetch_sessions=bool(v["tidelog.replica.fetch.session.enable"]),
    )


@dataclass
class Replication:
    """The follower fetchers, the AlterPartition sender and the leader's isr-expiration
    task (Kafka's ReplicaManager schedules ``maybeShrinkIsr`` every
    ``replica.lag.time.max.ms / 2``)."""

    fetcher_manager: ReplicaFetcherManager
    alter_partition: AlterPartitionManager
    shrink_isr: Callable[[], None] | None = None
    isr_expiration_interval_ms: int = 15_000
    quotas: ReplicationQuotas | None = None  # the replication throttles (quota.py)
    _isr_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.alter_partition.start()
        if self.shrink_isr is not None and self._isr_task is None:
            self._isr_task = asyncio.get_running_loop().create_task(
                self._isr_expiration(), name="isr-expiration"
            )

    async def _isr_expiration(self) -> None:
        assert self.shrink_isr is not None
        while True:
            await asyncio.sleep(self.isr_expiration_interval_ms / 1000)
            try:
                self.shrink_isr()
            except Exception:
                log.exception("isr-expiration failed")

    async def stop(self) -> None:
        task, self._isr_task = self._isr_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # not await: our own cancellation must propagate
        await self.fetcher_manager.shutdown()
        await self.alter_partition.shutdown()


def _throttled_replicas(
    log_config: Callable[[TopicPartition], LogConfig | None] | None, *, leader: bool
) -> Callable[[TopicPartition], list[str] | None]:
    """A hosted partition's leader.replication.throttled.replicas (or the follower's):
    None when the partition or its config is unknown."""

    def replicas(tp: TopicPartition) -> list[str] | None:
        c = log_config(tp) if log_config is not None else None
        if c is None:
            return None
        return c.leader_replication_throttled_replicas if leader else c.follower_replication_throttled_replicas

    return replicas


def _alter_partition_manager(
    config: BrokerConfig,
    metadata_cache: MetadataCache,
    endpoint: Callable[[int], tuple[str, int] | None],
    broker_epoch: Callable[[], int],
    security: ClientSecurity | None,
) -> AlterPartitionManager:
    """The AlterPartition sender, finding the controller and topic ids in the metadata image."""

    def controller() -> tuple[int, tuple[str, int]] | None:
        controller_id = metadata_cache.image.controller_id
        address = endpoint(controller_id) if controller_id >= 0 else None
        return None if address is None else (controller_id, address)

    def topic_id(topic: str) -> uuid.UUID | None:
        t = metadata_cache.image.topic(topic)
        return None if t is None else t.topic_id

    return AlterPartitionManager(
        config.node_id,
        broker_epoch,
        controller,
        topic_id,
        security=security,
        request_timeout_ms=int(config.values["replica.socket.timeout.ms"]),
    )


def build_replication(
    config: BrokerConfig,
    metadata_cache: MetadataCache,
    partitions: PartitionLookup,
    broker_epoch: Callable[[], int],
    security: ClientSecurity | None,
    *,
    shrink_isr: Callable[[], None] | None = None,
    on_high_watermark: Callable[[list[TopicPartition]], None] | None = None,
    log_config: Callable[[TopicPartition], LogConfig | None] | None = None,
) -> Replication:
    """The services, not started (call on the broker's event loop); ``log_config`` (a
    hosted partition's) names the throttled replicas."""
    listener = config.inter_broker_listener_name

    def endpoint(broker_id: int) -> tuple[str, int] | None:
        broker = metadata_cache.image.broker(broker_id)
        return None if broker is None else broker.endpoint(listener)

    quotas = replication_quotas(config.node_id, lambda: config.values,
                                _throttled_replicas(log_config, leader=True),
                                _throttled_replicas(log_config, leader=False))  # fmt: skip
    fetchers = ReplicaFetcherManager(
        fetch_settings(config),
        partitions,
        endpoint,
        num_fetchers=int(config.values["num.replica.fetchers"]),
        broker_epoch=broker_epoch,
        security=security,
        on_high_watermark=on_high_watermark,
        quota=quotas.follower,
    )
    alter = _alter_partition_manager(config, metadata_cache, endpoint, broker_epoch, security)
    metadata_cache.add_listener(lambda _image: fetchers.on_metadata_change())
    lag_ms = int(config.values["replica.lag.time.max.ms"])
    return Replication(fetchers, alter, shrink_isr, max(1, lag_ms // 2), quotas)
