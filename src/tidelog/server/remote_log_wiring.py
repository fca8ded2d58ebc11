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
from tidelog.util.topic_partition import TopicPartition

from .cluster_node import inter_broker_security
from .coordinator.partition_writer import PartitionWriter
from .remote_fetch import remote_fetch_for
from .remote_log_manager import RemoteLogManager, TieredPartition
from .remote_log_metadata_forwarder import MetadataForwarder
from .remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager

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


async def start_remote_log_manager(broker: TieredHost) -> RemoteLogManager | None:
    """The broker's RemoteLogManager, running, or None when tiered storage is off."""
    config = RemoteLogManagerConfig.from_props(broker.config.originals)
    if not config.remote_log_storage_system_enable:
        return None
    check_class_names(config)
    rsm = await asyncio.to_thread(create_remote_storage_manager, config.rsm_configs)
    rm = broker.replica_manager
    wait_ms = int(config.rlmm_configs["remote.log.metadata.consume.wait.ms"])

    async def ensure_topic() -> bool:
        if rm.topic(REMOTE_LOG_METADATA_TOPIC) is not None:
            return True
        return await broker.admin_manager.ensure_internal_topic(
            REMOTE_LOG_METADATA_TOPIC, config.metadata_topic_partitions,
            config.metadata_topic_configs(), config.metadata_topic_replication_factor)

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
        num_partitions=config.metadata_topic_partitions, ensure_topic=ensure_topic,
        forwarder=forwarder)
    rlm = RemoteLogManager(config, broker_id=broker.node_id, rsm=rsm, rlmm=rlmm,
                           partitions=partitions, topic_exists=topic_exists,
                           clock=broker.clock)
    rlm.start()
    rm.remote_fetch = remote_fetch_for(rlm, rm.partitions.get)  # the ReplicaManager's seam
    log.info("tiered storage on: remote log manager every %d ms",
             config.remote_log_manager_task_interval_ms)
    return rlm
