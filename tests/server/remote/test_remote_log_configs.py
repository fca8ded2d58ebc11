"""Tiered storage configs: Kafka's names and defaults, the rsm.config./rlmm.config.
pass-through, and the topic checks Kafka's LogConfig makes for remote.storage.enable,
answered INVALID_CONFIG with Kafka's messages by CreateTopics/AlterConfigs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import LONG_MAX, ConfigError
from tidelog.config.log_config import LogConfig
from tidelog.config.remote_log_config import (
    REMOTE_LOG_CONFIG_DEF,
    TOPIC_BASED_RLMM,
    RemoteLogManagerConfig,
    local_retention_bytes,
    local_retention_ms,
)
from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.server.remote_log_wiring import check_class_names
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.clock import ManualClock


def test_broker_defaults_are_kafkas() -> None:
    c = RemoteLogManagerConfig.from_props({})
    assert c.remote_log_storage_system_enable is False
    assert c.remote_log_storage_manager_class_name is None
    assert c.remote_log_metadata_manager_class_name == TOPIC_BASED_RLMM
    assert c.remote_log_manager_task_interval_ms == 30000
    assert c.remote_log_reader_threads == 10
    assert c.remote_fetch_max_wait_ms == 500
    assert c.remote_log_manager_copy_max_bytes_per_second == LONG_MAX
    assert c.remote_log_manager_fetch_max_bytes_per_second == LONG_MAX
    assert c.metadata_topic_partitions == 50
    assert c.metadata_topic_replication_factor == 3
    assert c.metadata_topic_configs()["retention.ms"] == "-1"
    assert REMOTE_LOG_CONFIG_DEF.keys["log.local.retention.bytes"].default == -2


def test_plugin_settings_pass_through_without_their_prefix() -> None:
    c = RemoteLogManagerConfig.from_props({
        "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
        "rsm.config.storage.s3.bucket.name": "b",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "7",
        "remote.log.manager.task.interval.ms": "1000",
    })
    assert c.rsm_configs == {
        "storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
        "storage.s3.bucket.name": "b"}
    assert c.metadata_topic_partitions == 7
    assert c.remote_log_manager_task_interval_ms == 1000
    custom = RemoteLogManagerConfig.from_props({
        "remote.log.storage.manager.impl.prefix": "mine.", "mine.storage.root": "/x"})
    assert custom.rsm_configs == {"storage.root": "/x"}


def test_bad_values_and_unknown_managers_are_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("remote.log.manager.task.interval.ms")):
        RemoteLogManagerConfig.from_props({"remote.log.manager.task.interval.ms": "0"})
    with pytest.raises(ConfigError, match=re.escape("remote.log.storage.manager.class.name")):
        check_class_names(RemoteLogManagerConfig.from_props({}))
    with pytest.raises(ConfigError, match=re.escape("remote.log.metadata.manager.class.name")):
        check_class_names(RemoteLogManagerConfig.from_props({
            "remote.log.storage.manager.class.name":
                "io.aiven.kafka.tieredstorage.RemoteStorageManager",
            "remote.log.metadata.manager.class.name": "com.example.Other"}))


def test_local_retention_follows_total_retention_at_minus_two() -> None:
    cfg = LogConfig.from_props({"retention.ms": "1000", "retention.bytes": "500"})
    assert (local_retention_ms(cfg), local_retention_bytes(cfg)) == (1000, 500)
    cfg = LogConfig.from_props({"local.retention.ms": "10", "local.retention.bytes": "5"})
    assert (local_retention_ms(cfg), local_retention_bytes(cfg)) == (10, 5)
    broker = LogConfig.from_props({}, {"log.local.retention.bytes": "77"})
    assert local_retention_bytes(broker) == 77


def _rm(tmp_path: Path, system_enable: bool) -> ReplicaManager:
    rm = ReplicaManager(BrokerConfig({
        "log.dirs": str(tmp_path),
        "remote.log.storage.system.enable": str(system_enable).lower()}), ManualClock())
    rm.startup()
    return rm


@pytest.mark.parametrize(("configs", "message"), [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"},
     "Remote log storage is unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "cleanup.policy": "compact,delete"},
     "Remote log storage is unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "101"},
     "Invalid value 101 for configuration local.retention.bytes: Value must not be more than "
     "retention.bytes property value: 100"),
    ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as "
     "retention.bytes value is set as 100."),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "1001"},
     "Invalid value 1001 for configuration local.retention.ms: Value must not be more than "
     "retention.ms property value: 1000"),
])
def test_topic_configs_kafka_refuses(tmp_path: Path, configs: dict[str, str],
                                     message: str) -> None:
    rm = _rm(tmp_path, True)
    try:
        with pytest.raises(ApiError) as err:
            rm.create_topic("t", 1, configs)
        assert err.value.code == ErrorCode.INVALID_CONFIG
        assert err.value.message == message
        rm.create_topic("t", 1, {"cleanup.policy": "compact"})
        with pytest.raises(ApiError) as err:  # AlterConfigs is checked the same way
            rm.set_topic_configs("t", configs)
        assert err.value.code == ErrorCode.INVALID_CONFIG
        assert rm.topic_config("t").remote_storage_enable is False
    finally:
        rm.shutdown()


def test_tiered_topics_need_the_brokers_tiered_storage(tmp_path: Path) -> None:
    rm = _rm(tmp_path, False)
    try:
        with pytest.raises(ApiError) as err:
            rm.create_topic("t", 1, {"remote.storage.enable": "true"})
        assert err.value.code == ErrorCode.INVALID_CONFIG
        assert err.value.message == ("Tiered Storage functionality is disabled in the broker. "
                                  "Topic cannot be configured with remote log storage.")
        assert rm.topic("t") is None
    finally:
        rm.shutdown()


def test_accepted_tiered_topic_configs(tmp_path: Path) -> None:
    rm = _rm(tmp_path, True)
    try:
        rm.create_topic("a", 1, {"remote.storage.enable": "true"})
        rm.create_topic("b", 1, {"remote.storage.enable": "true", "retention.bytes": "-1",
                                 "local.retention.bytes": "-1"})  # unlimited total: any local
        rm.create_topic("c", 1, {"remote.storage.enable": "true", "retention.ms": "1000",
                                 "local.retention.ms": "1000"})
        # local > total is only Kafka's concern for tiered topics
        rm.create_topic("d", 1, {"retention.bytes": "1", "local.retention.bytes": "5"})
        assert rm.topic_config("a").remote_storage_enable is True
    finally:
        rm.shutdown()
