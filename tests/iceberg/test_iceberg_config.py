"""Iceberg topic and broker settings: declared once, Redpanda's names as aliases, bad values
refused with INVALID_CONFIG by the real admin path."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tidelog.config.core import ConfigError
from tidelog.config.iceberg_config import (
    ICEBERG_CONFIG_DEF,
    SpecField,
    canonical_topic_configs,
    parse_partition_spec,
)
from tidelog.config.log_config import LogConfig
from tidelog.testing import EmbeddedBroker


def test_defaults() -> None:
    cfg = LogConfig.from_props({})
    assert cfg.tidelog_iceberg_mode == "disabled"
    assert cfg.tidelog_iceberg_partition_spec == "(hour(kafka.timestamp))"
    assert cfg.tidelog_iceberg_invalid_record_action == "dlq_table"
    assert cfg.tidelog_iceberg_delete is True
    values = ICEBERG_CONFIG_DEF.parse({})
    assert values["iceberg.enabled"] is False
    assert values["iceberg.namespace"] == "kafka"
    assert values["iceberg.target.lag.ms"] == 60000
    assert values["iceberg.dlq.table.suffix"] == "~dlq"
    assert values["iceberg.catalog.type"] == "sql"


def test_redpanda_aliases() -> None:
    cfg = LogConfig.from_props({"redpanda.iceberg.mode": "key_value",
                                "redpanda.iceberg.invalid.record.action": "drop"})
    assert cfg.tidelog_iceberg_mode == "key_value"
    assert cfg.tidelog_iceberg_invalid_record_action == "drop"
    assert canonical_topic_configs({"redpanda.iceberg.delete": "false"}) == {
        "tidelog.iceberg.delete": "false"}


@pytest.mark.parametrize("text, fields", [
    ("()", []),
    ("(hour(kafka.timestamp))", [SpecField("hour", "kafka.timestamp")]),
    ("(region, bucket(16, id), truncate(4, name))",
     [SpecField("identity", "region"), SpecField("bucket", "id", 16),
      SpecField("truncate", "name", 4)]),
])
def test_partition_spec_parses(text: str, fields: list[SpecField]) -> None:
    assert parse_partition_spec(text) == fields


@pytest.mark.parametrize("text", ["hour(ts)", "(hour(ts)", "(minute(ts))", "(bucket(0, id))",
                                  "(a b)", "(hour())"])
def test_bad_partition_spec_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"tidelog\.iceberg\.partition\.spec"):
        LogConfig.from_props({"tidelog.iceberg.partition.spec": text})


def test_bad_mode_refused() -> None:
    with pytest.raises(ConfigError, match="must be one of"):
        LogConfig.from_props({"redpanda.iceberg.mode": "tables"})


def test_admin_refuses_bad_values(tidelog_broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": tidelog_broker.bootstrap_servers})
    bad = NewTopic("t1", 1, 1, config={"redpanda.iceberg.mode": "tables"})
    fut = admin.create_topics([bad])["t1"]
    with pytest.raises(KafkaException) as err:
        fut.result(10)
    assert err.value.args[0].name() == "INVALID_CONFIG"
    admin.create_topics([NewTopic("t2", 1, 1, config={"redpanda.iceberg.mode": "key_value"})])[
        "t2"].result(10)
    res = ConfigResource("topic", "t2", incremental_configs=[ConfigEntry(
        "redpanda.iceberg.partition.spec", "(x y)",
        incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as err:
        admin.incremental_alter_configs([res])[res].result(10)
    assert err.value.args[0].name() == "INVALID_CONFIG"
    assert "cannot parse partition field" in str(err.value)
    described = admin.describe_configs([ConfigResource("topic", "t2")])
    entries = next(iter(described.values())).result(10)
    assert entries["tidelog.iceberg.mode"].value == "key_value"
