"""Kafka's cluster and replication keys with Kafka's defaults and checks."""

from __future__ import annotations

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import ConfigError


def test_cluster_defaults_are_kafkas() -> None:
    c = BrokerConfig({})
    assert c.zookeeper_connect is None
    assert c.zookeeper_session_timeout_ms == 18000
    assert c.zookeeper_connection_timeout_ms == 18000  # unset: the session timeout
    assert c.broker_rack is None
    assert c.offsets_topic_replication_factor == 3
    assert c.transaction_state_log_replication_factor == 3
    assert c.transaction_state_log_min_isr == 2
    assert c.unclean_leader_election_enable is False
    assert c.auto_leader_rebalance_enable is True
    assert c.leader_imbalance_check_interval_seconds == 300
    assert c.controlled_shutdown_enable is True
    assert c.replica_lag_time_max_ms == 30000
    assert c.num_replica_fetchers == 1
    assert c.replica_fetch_max_bytes == 1048576
    assert c.replica_fetch_min_bytes == 1
    assert c.replica_fetch_wait_max_ms == 500
    assert c.replica_fetch_backoff_ms == 1000
    assert c.replica_socket_timeout_ms == 30000
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_cluster_keys_parse_from_strings() -> None:
    c = BrokerConfig(
        {
            "zookeeper.connect": "127.0.0.1:2181,127.0.0.1:2182/kafka",
            "zookeeper.session.timeout.ms": "6000",
            "broker.id": "7",
            "broker.rack": "r1",
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            "listeners": "PLAINTEXT://127.0.0.1:0,REPL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPL:PLAINTEXT",
            "inter.broker.listener.name": "repl",
        }
    )
    assert c.zookeeper_connect == "127.0.0.1:2181,127.0.0.1:2182/kafka"
    assert c.zookeeper_connection_timeout_ms == 6000
    assert c.node_id == 7  # broker.id is node.id's alias
    assert c.broker_rack == "r1"
    assert c.default_replication_factor == 3
    assert c.min_insync_replicas == 2
    assert c.inter_broker_listener.name == "REPL"


def test_inter_broker_listener_must_exist_in_a_cluster() -> None:
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "inter.broker.listener.name": "NOPE"})
    with pytest.raises(ConfigError, match="only one of"):
        BrokerConfig(
            {
                "zookeeper.connect": "127.0.0.1:2181",
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            }
        )
    # without zookeeper.connect nothing changes for a single broker
    assert BrokerConfig({"inter.broker.listener.name": "NOPE"}).node_id == 1


def test_fetch_wait_must_not_exceed_lag_time() -> None:
    with pytest.raises(ConfigError, match=r"replica\.fetch\.wait\.max\.ms"):
        BrokerConfig(
            {
                "zookeeper.connect": "127.0.0.1:2181",
                "replica.fetch.wait.max.ms": "40000",
            }
        )
