"""The topic half of the ReplicaManager (a mixin): topics in the metadata store, their logs
made and removed, and, for a one-broker cluster, the metadata image published from the store
after every change. Kafka splits this between ZkAdminManager and the controller; a one-broker
cluster has neither, so the broker does it here (``metadata/admin.py`` runs the file work off
the event loop)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import ConfigError
from tidelog.config.log_config import LogConfig
from tidelog.config.remote_log_config import RemoteLogManagerConfig, validate_remote_storage
from tidelog.metrics import BrokerTopicStats
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition, validate_topic_name

from .errors import ApiError
from .metadata.cache import MetadataCache
from .metadata.image import BrokerInfo
from .metadata.local_store import local_image
from .metadata.store import MetadataStore, TopicInfo, new_topic_id
from .replica_manager_lai import start_first_epoch

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class ReplicaTopics:
    internal_topics = INTERNAL_TOPICS
    one_broker: bool
    config: BrokerConfig
    store: MetadataStore
    logs: LogManager
    metadata_cache: MetadataCache
    local_broker: BrokerInfo
    topic_stats: BrokerTopicStats | None
    pending_topics: set[str]
    _publish_lock: threading.Lock
    _admin_pool: ThreadPoolExecutor | None

    def _open(self, tp: TopicPartition, info: TopicInfo) -> Log:
        raise NotImplementedError  # the ReplicaManager's

    @property
    def remote_storage_system_enable(self) -> bool:
        """``remote.log.storage.system.enable`` (static, as in Kafka)."""
        return RemoteLogManagerConfig.from_props(
            self.config.originals).remote_log_storage_system_enable

    def _leader_epochs(self) -> Mapping[TopicPartition, int]:
        raise NotImplementedError  # the ReplicaManager's

    def _host_topic(self, info: TopicInfo) -> None:
        raise NotImplementedError  # the ReplicaManager's: partitions for the new logs

    def _unhost_topic(self, name: str) -> None:
        raise NotImplementedError  # the ReplicaManager's: the topic's partitions dropped

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    # -- the metadata image (one-broker mode) ------------------------------------------------
    def set_local_broker(self, info: BrokerInfo) -> None:
        """This broker's endpoints, once its listeners are bound."""
        self.local_broker = info
        self.publish_image()

    def publish_image(self) -> None:
        """A one-broker cluster's image from the local store: every partition led by this
        broker with ISR [self], or offline when its log dir failed. Runs on the loop, or on
        the thread that took a log dir offline."""
        if not self.one_broker:
            return  # the controller's UpdateMetadata makes the image
        offline = self.logs.offline_partitions
        with self._publish_lock:
            for _ in range(3):  # the loop may add a topic while a failing thread reads
                try:
                    image = local_image(self.store, self.local_broker, offline(),
                                        self._leader_epochs())
                    break
                except RuntimeError:
                    continue
            else:
                return
            self.metadata_cache.publish(image)

    def publish_topic(self, info: TopicInfo) -> None:
        """Store a new or changed topic durably, then show it in the image."""
        if info.name in self.store.topics:
            self.store.update_topic(info)
        else:
            self.store.create_topic(info)
        self._host_topic(info)
        self.publish_image()

    def unpublish_topic(self, name: str) -> TopicInfo:
        """Remove a topic from the store and the image (its logs stay for the caller)."""
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.config.values["delete.topic.enable"]:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED)
        self.store.delete_topic(name)
        self._unhost_topic(name)
        if self.topic_stats is not None:
            self.topic_stats.remove_topic(name)
        self.publish_image()
        return info

    def delete_logs(self, tps: Iterable[TopicPartition]) -> None:
        """Any thread (the LogManager locks); each log dir checkpointed once for all."""
        self.logs.delete_logs(list(tps))

    # -- topics -------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicInfo | None:
        return self.store.topics.get(name)

    def topics(self) -> list[TopicInfo]:
        return list(self.store.topics.values())

    def topic_config(self, name: str) -> LogConfig:
        info = self.store.topics[name]
        return LogConfig.from_props(info.configs, self.config.log_config_defaults(), strict=False)

    def validate_new_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        try:
            validate_topic_name(name)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if name in self.store.topics or name in self.pending_topics:
            # pending: being created or deleted off the loop (server/metadata/admin.py)
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions < 1:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        self.validate_configs(configs)

    def validate_configs(self, configs: Mapping[str, str]) -> LogConfig:
        try:
            cfg = LogConfig.from_props(configs, self.config.log_config_defaults())
            validate_remote_storage(cfg, self.remote_storage_system_enable)
            return cfg
        except ConfigError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        info = self.new_topic_info(name, partitions, configs)
        if validate_only:
            return info
        self.create_logs(info, range(partitions))
        self.publish_topic(info)
        log.info("created topic %s (%d partitions, configs %s)", name, partitions, info.configs)
        return info

    def new_topic_info(self, name: str, partitions: int,
                       configs: Mapping[str, str] | None) -> TopicInfo:
        """A new topic's description, its name, partition count and configs validated."""
        configs = dict(configs or {})
        self.validate_new_topic(name, partitions, configs)
        return TopicInfo(name, new_topic_id(), partitions, configs)

    def create_logs(self, info: TopicInfo, partitions: range) -> None:
        """Create the logs of ``partitions`` of ``info``, all or none: after a failure (out
        of descriptors, a disk error) the ones created are removed at once, no trace left.
        Runs on any thread (the LogManager locks); the caller publishes the topic after."""
        created: list[TopicPartition] = []
        try:
            for p in partitions:
                tp = TopicPartition(info.name, p)
                lg = self._open(tp, info)
                created.append(tp)
                if self.one_broker:  # (in a cluster the LeaderAndIsr starts it)
                    start_first_epoch(self.logs, lg)
        except Exception:
            self.logs.abandon_logs(
                created + [TopicPartition(info.name, p) for p in partitions[len(created):]])
            raise

    def admin_executor(self) -> ThreadPoolExecutor:
        """One thread for admin work that touches many files (metadata/admin.py): admin
        operations run one at a time, in order, and never on the event loop."""
        if self._admin_pool is None:
            self._admin_pool = ThreadPoolExecutor(1, thread_name_prefix="tidelog-admin")
        return self._admin_pool

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with broker defaults if auto.create.topics.enable (else None)."""
        if not self.config.values["auto.create.topics.enable"] or name in INTERNAL_TOPICS:
            return None
        try:
            return self.create_topic(name, int(self.config.values["num.partitions"]))
        except ApiError:
            return self.store.topics.get(name)

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.unpublish_topic(name)
        self.delete_logs(TopicPartition(name, p) for p in range(info.partitions))
        log.info("deleted topic %s", name)
        return info

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        if count <= info.partitions:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.partitions} partitions, which is higher "
                f"than or equal to the requested {count}.",
            )
        if validate_only:
            return
        self.create_logs(info, range(info.partitions, count))
        self.publish_topic(replace(info, partitions=count))

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        self.validate_configs(configs)
        if validate_only:
            return
        self.store.update_topic(replace(info, configs=dict(configs)))
        self.logs.update_topic_config(name, dict(configs))

