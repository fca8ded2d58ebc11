"""ZkData's znode formats, byte for byte as Kafka 3.6 (Scala 2.13, Jackson) writes them."""

from __future__ import annotations

import json
import uuid

from tidelog.server.zk import data as z
from tidelog.server.zk.kafka_json import immutable_map_order, mutable_map_order
from tidelog.util.topic_partition import TopicPartition


def test_partition_state_bytes_are_kafkas() -> None:
    # what zookeeper-shell shows for a Kafka 3.x partition state znode
    state = z.LeaderIsrAndControllerEpoch(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1)
    assert z.encode_partition_state(state) == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    )
    back = z.decode_partition_state(z.encode_partition_state(state), zk_version=7)
    assert back == z.LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 1, 0, 7)
    recovering = z.LeaderIsrAndControllerEpoch(2, 4, (2,), 3, z.LEADER_RECOVERING)
    js = json.loads(z.encode_partition_state(recovering))
    assert js == {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 3,
                  "isr": [2], "leader_recovery_state": 1}  # fmt: skip


def test_broker_registration_bytes_are_kafkas() -> None:
    reg = z.BrokerRegistration(
        broker_id=1, endpoints=(z.EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    )
    assert z.encode_broker(reg, timestamp_ms=1700000000000) == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":5,"timestamp":"1700000000000"}'
    )


def test_broker_registration_fields_and_versions() -> None:
    reg = z.BrokerRegistration(
        broker_id=3,
        endpoints=(
            z.EndPoint("CLIENT", "h1", 9093, "SASL_SSL"),
            z.EndPoint("REPLICATION", "h1", 9094, "PLAINTEXT"),
        ),
        rack="r1",
    )
    js = json.loads(z.encode_broker(reg, timestamp_ms=5))
    assert js == {
        "version": 5, "host": "h1", "port": 9094, "jmx_port": -1, "timestamp": "5",
        "endpoints": ["CLIENT://h1:9093", "REPLICATION://h1:9094"], "rack": "r1",
        "listener_security_protocol_map": {"CLIENT": "SASL_SSL", "REPLICATION": "PLAINTEXT"},
        "features": {},
    }  # fmt: skip
    back = z.decode_broker(3, z.encode_broker(reg), epoch=42)
    assert back.endpoints == reg.endpoints and back.rack == "r1" and back.epoch == 42
    # no PLAINTEXT endpoint: null host, port -1 (older clients cannot use it)
    ssl_only = z.BrokerRegistration(4, (z.EndPoint("SSL", "h", 1, "SSL"),))
    js = json.loads(z.encode_broker(ssl_only))
    assert js["host"] is None and js["port"] == -1
    v1 = z.decode_broker(9, b'{"version":1,"host":"old","port":9092,"jmx_port":9999}')
    assert v1.endpoints == (z.EndPoint("PLAINTEXT", "old", 9092, "PLAINTEXT"),)
    v2 = z.decode_broker(9, b'{"version":2,"host":"h","port":1,"jmx_port":-1,'
                            b'"endpoints":["SSL://h:9093"]}')  # fmt: skip
    assert v2.endpoints == (z.EndPoint("SSL", "h", 9093, "SSL"),)


def test_controller_and_epoch() -> None:
    assert z.encode_controller(2, timestamp_ms=123) == (
        b'{"version":2,"brokerid":2,"timestamp":"123","kraftControllerEpoch":-1}'
    )
    assert z.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5
    assert z.encode_controller_epoch(3) == b"3"
    assert z.decode_controller_epoch(b"17") == 17


def test_topic_assignment() -> None:
    tid = uuid.UUID("4a6b5a2c-1d3e-4f50-8a9b-0c1d2e3f4a5b")
    assignment = {0: z.ReplicaAssignment((1, 2, 3)), 1: z.ReplicaAssignment((2, 3, 1), (3,), ())}
    raw = z.encode_topic(tid, assignment)
    assert json.loads(raw) == {
        "version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"1": [3]}, "removing_replicas": {}, "topic_id": z.uuid_to_kafka(tid),
    }  # fmt: skip
    assert b" " not in raw
    back = z.decode_topic("t", raw)
    assert back.topic_id == tid and back.partitions == assignment
    # a tool (CMAK) writes version 1 without a topic id
    cmak = z.decode_topic("t", b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}')
    assert cmak.topic_id is None
    assert cmak.partitions == {0: z.ReplicaAssignment((1, 2)), 1: z.ReplicaAssignment((2, 1))}


def test_kafka_uuid_text() -> None:
    tid = uuid.uuid4()
    text = z.uuid_to_kafka(tid)
    assert len(text) == 22 and "=" not in text
    assert z.uuid_from_kafka(text) == tid
    # Kafka's Uuid.toString of (mostSig=1, leastSig=1)
    assert z.uuid_to_kafka(uuid.UUID(int=(1 << 64) | 1)) == "AAAAAAAAAAEAAAAAAAAAAQ"


def test_configs_and_notifications() -> None:
    assert z.encode_config({"cleanup.policy": "compact"}) == (
        b'{"version":1,"config":{"cleanup.policy":"compact"}}'
    )
    assert z.decode_config(z.encode_config({"a": "1", "b": "x"})) == {"a": "1", "b": "x"}
    assert z.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert z.decode_config_change(z.encode_config_change("topics/t")) == ("topics", "t")
    assert z.decode_config_change(b'{"version":1,"entity_type":"users","entity_name":"u"}') == (
        "users", "u",
    )  # fmt: skip
    tps = {TopicPartition("t", 0), TopicPartition("u", 3)}
    assert z.decode_isr_change(z.encode_isr_change(tps)) == tps
    assert json.loads(z.encode_isr_change([TopicPartition("t", 0)])) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}],
    }  # fmt: skip
    assert z.decode_preferred_replica_election(z.encode_preferred_replica_election(tps)) == tps
    assert z.encode_log_dir_event(4) == b'{"version":1,"broker":4,"event":1}'
    assert z.decode_log_dir_event(z.encode_log_dir_event(4)) == 4
    r = {TopicPartition("t", 1): (3, 1, 2)}
    assert z.encode_reassignment(r) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3,1,2]}]}'
    )
    assert z.decode_reassignment(z.encode_reassignment(r)) == r


def test_cluster_id_producer_ids_and_acls() -> None:
    assert z.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert z.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    block = z.ProducerIdBlock(broker_id=2, first_producer_id=1000, size=1000)
    assert z.encode_producer_id_block(block) == (
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    )
    assert z.decode_producer_id_block(z.encode_producer_id_block(block)) == block
    acl = z.ZkAclEntry("User:alice", "Allow", "Read", "*")
    assert z.encode_acls([acl]) == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )
    assert z.decode_acls(z.encode_acls([acl])) == [acl]
    assert z.acl_path("Topic", "t") == "/kafka-acl/Topic/t"
    assert z.acl_path("Group", "g", "PREFIXED") == "/kafka-acl-extended/prefixed/Group/g"
    assert z.encode_literal_acl_change("Topic", "t") == b"Topic:t"
    assert json.loads(z.encode_extended_acl_change("Topic", "t", "PREFIXED")) == {
        "version": 1, "resourceType": "TOPIC", "name": "t", "patternType": "PREFIXED",
    }  # fmt: skip


def test_scala_map_orders() -> None:
    # up to four entries an immutable Map keeps insertion order
    assert immutable_map_order(["d", "c", "b", "a"]) == ["d", "c", "b", "a"]
    # a mutable.HashMap of partition numbers: buckets of (h ^ h >>> 16) & 15
    assert mutable_map_order([str(i) for i in range(10)]) == [str(i) for i in range(10)]
    # twelve entries grow the table to 32 buckets: "10".."11" (hash 1567, 1568) land in 31, 0
    order = mutable_map_order([str(i) for i in range(12)])
    assert order[0] == "11" and order[-1] == "10"
    assert sorted(order, key=int) == [str(i) for i in range(12)]


def test_persistent_paths() -> None:
    assert "/brokers/ids" in z.PERSISTENT_ZK_PATHS and "/config/ips" in z.PERSISTENT_ZK_PATHS
    assert z.partition_state_path(TopicPartition("t", 2)) == "/brokers/topics/t/partitions/2/state"
