"""BrokerConfig: Kafka names, defaults, listeners and topic-level defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import ConfigError


def test_defaults_are_kafkas() -> None:
    c = BrokerConfig({})
    assert (c.listener.host, c.listener.port) == ("localhost", 9092)
    assert c.num_partitions == 1 and c.auto_create_topics_enable is True
    assert c.values["default.replication.factor"] == 1
    assert c.values["message.max.bytes"] == 1048588
    assert c.values["socket.request.max.bytes"] == 104857600
    assert c.log_dirs == [Path("/tmp/kafka-logs")]
    assert c.log_config_defaults() == {}


def test_log_dirs_and_topic_defaults() -> None:
    c = BrokerConfig(
        {
            "log.dirs": "/a,/b",
            "log.retention.hours": "2",
            "log.segment.bytes": "1000",
            "message.max.bytes": "5000",
        }
    )
    assert c.log_dirs == [Path("/a"), Path("/b")]
    assert c.log_config_defaults() == {
        "retention.ms": "7200000",
        "segment.bytes": "1000",
        "max.message.bytes": "5000",
    }


def test_listeners() -> None:
    c = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://broker.example:19092",
        }
    )
    assert (c.listener.host, c.listener.port) == ("127.0.0.1", 0)
    assert (c.advertised_listener.host, c.advertised_listener.port) == ("broker.example", 19092)
    v6 = BrokerConfig({"listeners": "PLAINTEXT://[::1]:9093"})
    assert (v6.listener.host, v6.listener.port) == ("::1", 9093)
    anyhost = BrokerConfig({"listeners": "PLAINTEXT://:9094"})
    assert anyhost.listener.host == "" and anyhost.advertised_listener.host
    with pytest.raises(ConfigError, match="nonroutable"):
        BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    BrokerConfig(
        {"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://host:9092"}
    )
    with pytest.raises(ConfigError, match="listeners"):
        BrokerConfig({"listeners": "not a uri"})
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        BrokerConfig({"listeners": "INTERNAL://localhost:9093"})
    several = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "advertised.listeners": "INTERNAL://internal.example:9095",
        }
    )
    assert [lst.name for lst in several.listeners] == ["PLAINTEXT", "INTERNAL"]
    assert several.security_protocol("INTERNAL") == "SASL_SSL"
    assert several.advertised["INTERNAL"].host == "internal.example"
    assert several.advertised["PLAINTEXT"].host == "127.0.0.1"


def test_bad_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        BrokerConfig({"num.partitions": "0"})
    with pytest.raises(ConfigError, match=r"default\.replication\.factor"):
        BrokerConfig({"default.replication.factor": "3"})
    with pytest.raises(ConfigError, match=r"auto\.create\.topics\.enable"):
        BrokerConfig({"auto.create.topics.enable": "maybe"})


def test_broker_id_alias() -> None:
    assert BrokerConfig({"broker.id": "4"}).node_id == 4
    assert BrokerConfig({"broker.id": "4", "node.id": "5"}).node_id == 5
