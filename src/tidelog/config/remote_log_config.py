"""Tiered storage settings (KIP-405): Kafka's ``RemoteLogManagerConfig`` and
``TopicBasedRemoteLogMetadataManagerConfig`` names and defaults, and the topic checks of
Kafka's ``LogConfig.validateTopicLogConfigValues`` for ``remote.storage.enable``.

The remote storage manager's own settings pass through under ``rsm.config.`` (Kafka's
``remote.log.storage.manager.impl.prefix``), the metadata manager's under ``rlmm.config.``
(``remote.log.metadata.manager.impl.prefix``), each with the prefix removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .core import LONG_MAX, ConfigDef, ConfigError, at_least, between
from .log_config import LogConfig

TOPIC_BASED_RLMM = (
    "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
)
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

REMOTE_LOG_CONFIG_DEF = ConfigDef()
_d = REMOTE_LOG_CONFIG_DEF.define
_d("remote.log.storage.system.enable", "boolean", False,
   "Enable tiered storage on this broker (topics then opt in with remote.storage.enable).")
_d("remote.log.storage.manager.class.name", "string", None,
   "The RemoteStorageManager: tidelog's own (Aiven's io.aiven.kafka.tieredstorage.RemoteStorageManager "
   "is accepted as its name); its backend comes from rsm.config.storage.backend.class.")
_d("remote.log.storage.manager.class.path", "string", None, "Accepted and ignored (Java only).")
_d("remote.log.storage.manager.impl.prefix", "string", "rsm.config.",
   "Prefix of the RemoteStorageManager's own settings.")
_d("remote.log.metadata.manager.class.name", "string", TOPIC_BASED_RLMM,
   "The RemoteLogMetadataManager: Kafka's topic-based one (__remote_log_metadata).")
_d("remote.log.metadata.manager.class.path", "string", None, "Accepted and ignored (Java only).")
_d("remote.log.metadata.manager.impl.prefix", "string", "rlmm.config.",
   "Prefix of the RemoteLogMetadataManager's own settings.")
_d("remote.log.metadata.manager.listener.name", "string", None,
   "Listener of the metadata manager's clients (the broker writes its own topic: unused).")
_d("remote.log.manager.task.interval.ms", "long", 30000,
   "Interval of the copy and expiration tasks of each partition led here.", at_least(1))
_d("remote.log.manager.task.retry.backoff.ms", "long", 500,
   "First back-off after a failed remote storage call.", at_least(1))
_d("remote.log.manager.task.retry.backoff.max.ms", "long", 30000,
   "Longest back-off after failed remote storage calls.", at_least(1))
_d("remote.log.manager.task.retry.jitter", "double", 0.2,
   "Random jitter of the back-off.", between(0, 0.5))
_d("remote.log.manager.thread.pool.size", "int", 10,
   "Threads copying segments and expiring remote ones.", at_least(1))
_d("remote.log.manager.copier.thread.pool.size", "int", -1,
   "Threads copying segments (-1: remote.log.manager.thread.pool.size).", at_least(-1))
_d("remote.log.manager.expiration.thread.pool.size", "int", -1,
   "Threads expiring remote segments (-1: remote.log.manager.thread.pool.size).", at_least(-1))
_d("remote.log.reader.threads", "int", 10, "Threads reading remote segments for fetches.",
   at_least(1))
_d("remote.log.reader.max.pending.tasks", "int", 100,
   "Remote reads queued before more are refused.", at_least(1))
_d("remote.log.index.file.cache.total.size.bytes", "long", 1024 * 1024 * 1024,
   "Bytes of remote segments' offset, time and transaction indexes cached on local disk "
   "(<first log dir>/remote-log-index-cache).", at_least(1))
_d("remote.fetch.max.wait.ms", "int", 500,
   "Longest wait of a fetch for its remote read (DelayedRemoteFetch).", at_least(1))
_d("remote.list.offsets.request.timeout.ms", "long", 30000,
   "Longest wait of a ListOffsets for remote storage.", at_least(1))
_d("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX,
   "Bytes per second all copies to remote storage may take.", at_least(1))
_d("remote.log.manager.copy.quota.window.num", "int", 11, "Samples of the copy quota.",
   at_least(1))
_d("remote.log.manager.copy.quota.window.size.seconds", "int", 1,
   "Length of each copy quota sample.", at_least(1))
_d("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX,
   "Bytes per second all reads from remote storage may take.", at_least(1))
_d("remote.log.manager.fetch.quota.window.num", "int", 11, "Samples of the fetch quota.",
   at_least(1))
_d("remote.log.manager.fetch.quota.window.size.seconds", "int", 1,
   "Length of each fetch quota sample.", at_least(1))
_d("log.local.retention.ms", "long", -2,
   "Default local.retention.ms (-2: log.retention.ms).", at_least(-2))
_d("log.local.retention.bytes", "long", -2,
   "Default local.retention.bytes (-2: log.retention.bytes).", at_least(-2))

# TopicBasedRemoteLogMetadataManagerConfig, given under remote.log.metadata.manager.impl.prefix
RLMM_CONFIG_DEF = ConfigDef()
_m = RLMM_CONFIG_DEF.define
_m("remote.log.metadata.topic.replication.factor", "short", 3,
   "Replication factor of __remote_log_metadata.", at_least(1))
_m("remote.log.metadata.topic.num.partitions", "int", 50,
   "Partitions of __remote_log_metadata.", at_least(1))
_m("remote.log.metadata.topic.retention.ms", "long", -1,
   "Retention of __remote_log_metadata (-1: kept forever; a shorter one must outlive "
   "every remote segment).")
_m("remote.log.metadata.topic.min.isr", "int", 2, "min.insync.replicas of __remote_log_metadata.",
   at_least(1))
_m("remote.log.metadata.consume.wait.ms", "long", 120000,
   "Longest wait for a written record to be replicated and read back.", at_least(0))
_m("remote.log.metadata.initialization.retry.interval.ms", "long", 100,
   "Retry interval while __remote_log_metadata is being created.", at_least(0))
_m("remote.log.metadata.initialization.retry.max.timeout.ms", "long", 120000,
   "Longest wait for __remote_log_metadata to be created.", at_least(0))


def prefixed(originals: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """Keys under ``prefix`` with the prefix removed (Kafka's ``originalsWithPrefix``)."""
    return {k[len(prefix):]: str(v) for k, v in originals.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """The broker's tiered storage settings; attributes are Kafka's names in snake_case."""

    remote_log_storage_system_enable: bool
    remote_log_storage_manager_class_name: str | None
    remote_log_metadata_manager_class_name: str
    remote_log_manager_task_interval_ms: int
    remote_log_manager_task_retry_backoff_ms: int
    remote_log_manager_task_retry_backoff_max_ms: int
    remote_log_manager_task_retry_jitter: float
    remote_log_manager_copier_thread_pool_size: int
    remote_log_reader_threads: int
    remote_log_index_file_cache_total_size_bytes: int
    remote_fetch_max_wait_ms: int
    remote_list_offsets_request_timeout_ms: int
    remote_log_manager_copy_max_bytes_per_second: int
    remote_log_manager_fetch_max_bytes_per_second: int
    rsm_configs: dict[str, str]
    rlmm_configs: dict[str, int]

    @classmethod
    def from_props(cls, originals: Mapping[str, Any]) -> RemoteLogManagerConfig:
        v = REMOTE_LOG_CONFIG_DEF.parse(originals)
        rlmm_raw = prefixed(originals, str(v["remote.log.metadata.manager.impl.prefix"]))
        rlmm = {k: int(x) for k, x in RLMM_CONFIG_DEF.parse(
            {k: x for k, x in rlmm_raw.items() if k in RLMM_CONFIG_DEF}).items()}
        copier = int(v["remote.log.manager.copier.thread.pool.size"])
        if copier == -1:
            copier = int(v["remote.log.manager.thread.pool.size"])
        return cls(
            remote_log_storage_system_enable=bool(v["remote.log.storage.system.enable"]),
            remote_log_storage_manager_class_name=v["remote.log.storage.manager.class.name"],
            remote_log_metadata_manager_class_name=str(
                v["remote.log.metadata.manager.class.name"]),
            remote_log_manager_task_interval_ms=int(v["remote.log.manager.task.interval.ms"]),
            remote_log_manager_task_retry_backoff_ms=int(
                v["remote.log.manager.task.retry.backoff.ms"]),
            remote_log_manager_task_retry_backoff_max_ms=int(
                v["remote.log.manager.task.retry.backoff.max.ms"]),
            remote_log_manager_task_retry_jitter=float(v["remote.log.manager.task.retry.jitter"]),
            remote_log_manager_copier_thread_pool_size=copier,
            remote_log_reader_threads=int(v["remote.log.reader.threads"]),
            remote_log_index_file_cache_total_size_bytes=int(
                v["remote.log.index.file.cache.total.size.bytes"]),
            remote_fetch_max_wait_ms=int(v["remote.fetch.max.wait.ms"]),
            remote_list_offsets_request_timeout_ms=int(
                v["remote.list.offsets.request.timeout.ms"]),
            remote_log_manager_copy_max_bytes_per_second=int(
                v["remote.log.manager.copy.max.bytes.per.second"]),
            remote_log_manager_fetch_max_bytes_per_second=int(
                v["remote.log.manager.fetch.max.bytes.per.second"]),
            rsm_configs=prefixed(originals, str(v["remote.log.storage.manager.impl.prefix"])),
            rlmm_configs=rlmm,
        )

    @property
    def metadata_topic_partitions(self) -> int:
        return int(self.rlmm_configs["remote.log.metadata.topic.num.partitions"])

    @property
    def metadata_topic_replication_factor(self) -> int:
        return int(self.rlmm_configs["remote.log.metadata.topic.replication.factor"])

    def metadata_topic_configs(self) -> dict[str, str]:
        """Configs of ``__remote_log_metadata`` as Kafka's ``createMetadataTopicRequest``."""
        return {
            "retention.ms": str(self.rlmm_configs["remote.log.metadata.topic.retention.ms"]),
            "cleanup.policy": "delete",
            "remote.storage.enable": "false",
        }


class RemoteStorageConfigError(ConfigError):
    """A topic config Kafka refuses with tiered storage; ``str()`` is Kafka's message."""

    def __init__(self, name: str, value: object, message: str, *, bare: bool = False) -> None:
        super().__init__(name, value, message)
        if bare:  # Kafka's one-argument ConfigException: the message alone
            self.args = (message,)


def validate_remote_storage(config: LogConfig, system_enable: bool) -> None:
    """Kafka's checks of a topic's effective config when ``remote.storage.enable`` is set:
    the broker's tiered storage must be on, the topic not compacted, and local retention
    within total retention (each ``-2`` follows ``retention.*``)."""
    if not config.remote_storage_enable:
        return
    if not system_enable:
        raise RemoteStorageConfigError(
            "remote.storage.enable", True,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.", bare=True)
    if config.compact:
        raise RemoteStorageConfigError(
            "cleanup.policy", ",".join(config.cleanup_policy),
            "Remote log storage is unsupported for the compacted topics", bare=True)
    _check_local_retention("local.retention.bytes", config.local_retention_bytes,
                           "retention.bytes", config.retention_bytes,
                           unlimited=config.retention_bytes <= -1)
    _check_local_retention("local.retention.ms", config.local_retention_ms,
                           "retention.ms", config.retention_ms,
                           unlimited=config.retention_ms == -1)


def _check_local_retention(local_name: str, local: int, total_name: str, total: int, *,
                           unlimited: bool) -> None:
    if unlimited or local == -2:  # Kafka: retentionBytes > -1 / retentionMs != -1
        return
    if local == -1:
        raise RemoteStorageConfigError(
            local_name, local, f"Value must not be -1 as {total_name} value is set as {total}.")
    if local > total:
        raise RemoteStorageConfigError(
            local_name, local, f"Value must not be more than {total_name} property value: {total}")


def local_retention_ms(config: LogConfig) -> int:
    """Kafka's ``LogConfig.localRetentionMs``: -2 follows ``retention.ms``."""
    return config.retention_ms if config.local_retention_ms == -2 else config.local_retention_ms


def local_retention_bytes(config: LogConfig) -> int:
    """Kafka's ``LogConfig.localRetentionBytes``: -2 follows ``retention.bytes``."""
    if config.local_retention_bytes == -2:
        return config.retention_bytes
    return config.local_retention_bytes
