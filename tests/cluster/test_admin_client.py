"""confluent-kafka's AdminClient against three brokers on one ZooKeeper."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedBroker


@pytest.fixture
def three(zookeeper_connect: str) -> Iterator[tuple[list[EmbeddedBroker], KafkaZkClient]]:
    brokers = [EmbeddedBroker({
        "broker.id": str(b), "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": "6000", "controlled.shutdown.retry.backoff.ms": "100",
    }).start() for b in (1, 2, 3)]  # fmt: skip
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    for b in brokers:  # every broker knows every broker and the controller
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        deadline = time.monotonic() + 30
        while True:
            md = admin.list_topics(timeout=10)
            if sorted(md.brokers) == [1, 2, 3] and md.controller_id > 0:
                break
            assert time.monotonic() < deadline, (sorted(md.brokers), md.controller_id)
            time.sleep(0.05)
    yield brokers, zk
    zk.close()
    for b in brokers:
        b.stop()


def test_create_topic_of_12_partitions_rf3(three) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = three
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap_servers for b in brokers)})
    fut = admin.create_topics([NewTopic("orders", num_partitions=12, replication_factor=3)],
                              operation_timeout=30)["orders"]  # fmt: skip
    assert fut.result(30) is None
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic="orders", timeout=10)
        parts = md.topics["orders"].partitions
        if len(parts) == 12 and all(p.leader >= 0 for p in parts.values()):
            break
        assert time.monotonic() < deadline, parts
        time.sleep(0.1)
    assert sorted(md.brokers) == [1, 2, 3]
    assert Counter(p.leader for p in parts.values()) == {1: 4, 2: 4, 3: 4}
    for p in parts.values():
        assert sorted(p.replicas) == [1, 2, 3] and p.leader == p.replicas[0]
        assert sorted(p.isrs) == [1, 2, 3]
    # the znodes as Kafka writes them
    raw, _ = zk.zk.get("/brokers/topics/orders")
    topic = json.loads(raw)
    assert list(topic) == ["partitions", "removing_replicas", "topic_id", "adding_replicas", "version"]
    assert {int(k): v for k, v in topic["partitions"].items()} == {p.id: p.replicas for p in parts.values()}
    for p in parts.values():
        state = json.loads(zk.zk.get(f"/brokers/topics/orders/partitions/{p.id}/state")[0])
        assert list(state) == ["controller_epoch", "leader", "version", "leader_epoch", "isr"]
        assert state["leader"] == p.leader and state["version"] == 1
    # INVALID_REPLICATION_FACTOR when the factor exceeds the live brokers
    bad = admin.create_topics([NewTopic("big", num_partitions=1, replication_factor=4)])["big"]
    with pytest.raises(Exception, match=r"INVALID_REPLICATION_FACTOR|larger than available brokers"):
        bad.result(30)


def test_partitions_configs_and_deletion_through_any_broker(three) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = three
    first = AdminClient({"bootstrap.servers": brokers[0].bootstrap_servers})
    last = AdminClient({"bootstrap.servers": brokers[2].bootstrap_servers})
    assert first.create_topics([NewTopic("t", num_partitions=2, replication_factor=2)])["t"].result(30) is None
    assert first.create_partitions([NewPartitions("t", 5)])["t"].result(30) is None
    got = zk.get_topic_assignment("t")
    assert got is not None and sorted(got[0].partitions) == list(range(5))
    assert all(len(a.replicas) == 2 for a in got[0].partitions.values())
    res = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    first.incremental_alter_configs([res])[res].result(30)
    assert zk.get_entity_configs("topics", "t") == {"retention.ms": "12345"}

    def retention_on_last() -> str:
        r = ConfigResource(ResourceType.TOPIC, "t")
        return last.describe_configs([r])[r].result(30)["retention.ms"].value

    deadline = time.monotonic() + 15
    while retention_on_last() != "12345":  # the other broker learns it from /config/changes
        assert time.monotonic() < deadline
        time.sleep(0.1)

    def retention_of_hosted_logs() -> set[int]:
        return {int(lg.config.retention_ms) for b in brokers
                for lg in b.broker.replica_manager.logs.all_logs() if lg.topic_partition.topic == "t"}  # fmt: skip

    while retention_of_hosted_logs() != {12345}:  # and every replica's log applies it
        assert time.monotonic() < deadline, retention_of_hosted_logs()
        time.sleep(0.05)
    invalid = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        first.incremental_alter_configs([invalid])[invalid].result(30)
    assert last.delete_topics(["t"], operation_timeout=30)["t"].result(30) is None
    assert zk.get_all_topics() == []


def test_idempotent_producers_on_different_brokers_get_different_producer_ids(three) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = three
    admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap_servers})
    admin.create_topics([NewTopic("pids", num_partitions=3, replication_factor=1)])["pids"].result(30)
    leaders = {p.id: p.leader for p in admin.list_topics(topic="pids", timeout=10).topics["pids"].partitions.values()}
    # each broker hands out ids from its own block of /latest_producer_id_block
    ids = [b.broker.replica_manager.allocate_producer_id() for b in brokers]
    assert len(set(ids)) == 3 and len({i // 1000 for i in ids}) == 3
    latest = json.loads(zk.zk.get("/latest_producer_id_block")[0])
    assert list(latest) == ["version", "broker", "block_start", "block_end"]
    assert int(latest["block_end"]) - int(latest["block_start"]) == 999
    # and idempotent producers bootstrapped from each broker all deliver
    for b in brokers:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True})
        for part in leaders:
            p.produce("pids", value=b"x", partition=part)
        assert p.flush(30) == 0
