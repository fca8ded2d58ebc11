"""Tiered storage in the broker: the RemoteLogManager built from the broker's config over
its replica manager, started after the logs and stopped before them.

``remote.log.storage.system.enable=false`` (the default) builds nothing. With it on, the
remote storage manager is made (its backend checked: a wrong endpoint, bucket or credentials
stop the start with one error naming them) and ``__remote_log_metadata`` is created with
the first write, as Kafka's TopicBasedRemoteLogMetadataManager creates it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from tidelog.config.core import ConfigError
from tidelog.config.remote_log_config import (
    REMOTE_LOG_METADATA_TOPIC,
    TOPIC_BASED_RLMM,
    RemoteLogManagerConfig,
)
from tidelog.storage.log import Log
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.index_cache import RemoteIndexCache
from tidelog.util.topic_partition import TopicPartition

from .coordinator.partition_writer import PartitionWriter
from .remote_fetch import remote_fetch_for
from .remote_log_manager import RemoteLogManager, TieredPartition
from .remote_log_metadata_forwarder import MetadataForwarder
from .remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from .remote_log_metadata_topic import RF_CONFIG, MetadataTopicInitializer
from .security.inter_broker import inter_broker_security

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.util.clock import Clock

    from .metadata.admin import AdminManager
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# Kafka's remote.log.storage.manager.class.name values taken as tidelog's own manager
RSM_CLASS_NAMES = frozenset({
    "io.aiven.kafka.tieredstorage.RemoteStorageManager",
    "tidelog.storage.remote.rsm.RemoteStorageManager",
})
RLMM_CLASS_NAMES = frozenset({TOPIC_BASED_RLMM})


def check_class_names(config: RemoteLogManagerConfig) -> None:
    rsm = config.remote_log_storage_manager_class_name
    if rsm not in RSM_CLASS_NAMES:
        raise ConfigError("remote.log.storage.manager.class.name", rsm,
                          f"must be one of {', '.join(sorted(RSM_CLASS_NAMES))}")
    rlmm = config.remote_log_metadata_manager_class_name
    if rlmm not in RLMM_CLASS_NAMES:
        raise ConfigError("remote.log.metadata.manager.class.name", rlmm,
                          f"must be {TOPIC_BASED_RLMM}")


class TieredHost(Protocol):
    """What tiered storage uses of the broker that hosts it."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def node_id(self) -> int: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def admin_manager(self) -> AdminManager: ...


def metadata_topic_initializer(broker: TieredHost,
                               config: RemoteLogManagerConfig) -> MetadataTopicInitializer:
    """Creates ``__remote_log_metadata`` with the configured replication factor. A one-broker
    ``tidelog serve`` hosts every replica itself: its internal topics get one replica, as
    Kafka's single-node quickstart sets them (``offsets.topic.replication.factor=1``, and
    ``rlmm.config.remote.log.metadata.topic.replication.factor=1`` in its tiered-storage
    example)."""
    rm = broker.replica_manager
    rf = config.metadata_topic_replication_factor
    prefix = str(broker.config.originals.get("remote.log.metadata.manager.impl.prefix",
                                             "rlmm.config."))
    if rm.one_broker and rf != 1:
        log.info("one broker: %s gets replication factor 1 (%s%s=%d is for a cluster)",
                 REMOTE_LOG_METADATA_TOPIC, prefix, RF_CONFIG, rf)

    def partitions() -> int | None:
        info = rm.topic(REMOTE_LOG_METADATA_TOPIC)
        return None if info is None else int(info.partitions)

    async def ensure() -> bool:
        if partitions() is not None:
            return True
        return await broker.admin_manager.ensure_internal_topic(
            REMOTE_LOG_METADATA_TOPIC, config.metadata_topic_partitions,
            config.metadata_topic_configs(), rf)

    def live_brokers() -> int:
        return len(rm.metadata_cache.image.live_broker_ids())

    rlmm = config.rlmm_configs
    return MetadataTopicInitializer(
        partitions=partitions, ensure=ensure,
        live_brokers=None if rm.one_broker else live_brokers,
        num_partitions=config.metadata_topic_partitions, replication_factor=rf,
        config_prefix=prefix,
        retry_interval_ms=int(rlmm["remote.log.metadata.initialization.retry.interval.ms"]),
        retry_max_timeout_ms=int(
            rlmm["remote.log.metadata.initialization.retry.max.timeout.ms"]),
        clock=broker.clock)


async def start_remote_log_manager(broker: TieredHost) -> RemoteLogManager | None:
    """The broker's RemoteLogManager, running, or None when tiered storage is off."""
    config = RemoteLogManagerConfig.from_props(broker.config.originals)
    if not config.remote_log_storage_system_enable:
        return None
    check_class_names(config)
    rsm = await asyncio.to_thread(create_remote_storage_manager, config.rsm_configs)
    rm = broker.replica_manager
    wait_ms = int(config.rlmm_configs["remote.log.metadata.consume.wait.ms"])

    initializer = metadata_topic_initializer(broker, config)
    def get_log(tp: TopicPartition) -> Log | None:
        try:
            return rm.get_log(tp)
        except Exception:  # an offline dir: nothing to replay here
            return None

    def partitions() -> Iterable[TieredPartition]:
        return list(rm.partitions.values())

    def topic_exists(name: str, topic_id: object) -> bool:
        info = rm.topic(name)
        return info is not None and info.topic_id == topic_id

    forwarder = None
    if not rm.one_broker:  # metadata partitions led by other brokers: produced there
        forwarder = MetadataForwarder(
            broker.node_id, rm.metadata_cache, broker.config.inter_broker_listener_name,
            inter_broker_security(broker.config), get_log, timeout_ms=wait_ms)
    rlmm = TopicBasedRemoteLogMetadataManager(
        appender=PartitionWriter(rm, REMOTE_LOG_METADATA_TOPIC, wait_ms), get_log=get_log,
        num_partitions=config.metadata_topic_partitions, ensure_topic=initializer.try_once,
        forwarder=forwarder, initializer=initializer)
    index_cache = await asyncio.to_thread(
        RemoteIndexCache, config.remote_log_index_file_cache_total_size_bytes, rsm,
        broker.config.log_dirs[0])
    rlm = RemoteLogManager(config, broker_id=broker.node_id, rsm=rsm, rlmm=rlmm,
                           partitions=partitions, topic_exists=topic_exists,
                           clock=broker.clock, index_cache=index_cache)
    rlm.start()
    rlm.background(initializer.run())  # Kafka's RLMMInitializationThread
    rm.remote_fetch = remote_fetch_for(rlm, rm.partitions.get)  # the ReplicaManager's seam
    log.info("tiered storage on: remote log manager every %d ms",
             config.remote_log_manager_task_interval_ms)
    return rlm
