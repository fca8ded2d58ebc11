"""A Java-free Kafka 4.x client path: confluent-kafka (librdkafka) against a real broker,
using what Kafka 4.x brokers advertise — Fetch by topic id, authorized operations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tidelog.server.registry import HandlerSpec
from tidelog.testing import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def spy_versions(b: EmbeddedBroker, api_key: int) -> list[int]:
    """Record the version of every request of ``api_key`` the broker handles."""
    seen: list[int] = []
    spec = b.broker.registry.get(api_key)

    async def handle(ctx: Any, request: Any) -> Any:
        seen.append(ctx.api_version)
        return await spec.handle(ctx, request)

    b.broker.registry._specs[api_key] = HandlerSpec(
        spec.api_key, spec.min_version, spec.max_version, handle, spec.name
    )
    return seen


def admin(b: EmbeddedBroker) -> Any:
    return admin_mod.AdminClient({"bootstrap.servers": b.bootstrap_servers})


def create_topic(b: EmbeddedBroker, name: str, partitions: int = 1) -> None:
    a = admin(b)  # kept alive until its futures complete
    futures = a.create_topics([admin_mod.NewTopic(name, partitions, 1)])
    futures[name].result(timeout=30)


def test_consumer_fetches_by_topic_id(broker: EmbeddedBroker) -> None:
    create_topic(broker, "by-id")
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        p.produce("by-id", value=b"m%d" % i)
    assert p.flush(30) == 0
    seen = spy_versions(broker, 1)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "by-id-g",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition("by-id", 0, 0)])
        got: list[bytes] = []
        for _ in range(100):
            if len(got) >= 20:
                break
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == [b"m%d" % i for i in range(20)]
    assert seen and min(seen) >= 13, seen  # librdkafka names topics by id once advertised


def test_describe_topics_with_authorized_operations(broker: EmbeddedBroker) -> None:
    create_topic(broker, "described", 3)
    coll = ck.TopicCollection(["described"])
    a = admin(broker)
    futures = a.describe_topics(coll, include_authorized_operations=True)
    desc = futures["described"].result(timeout=30)
    assert [p.id for p in desc.partitions] == [0, 1, 2]
    ops = {op.name for op in desc.authorized_operations}
    assert ops == {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                   "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    assert desc.topic_id is not None


def test_describe_cluster_with_authorized_operations(broker: EmbeddedBroker) -> None:
    a = admin(broker)
    desc = a.describe_cluster(include_authorized_operations=True).result(timeout=30)
    assert [n.id for n in desc.nodes] == [broker.broker.node_id]
    ops = {op.name for op in desc.authorized_operations}
    assert ops == {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                   "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}


def test_elect_leaders_is_not_needed(broker: EmbeddedBroker) -> None:
    create_topic(broker, "elected", 2)
    a = admin(broker)
    tps = [ck.TopicPartition("elected", 0), ck.TopicPartition("elected", 1)]
    result = a.elect_leaders(ck.ElectionType.PREFERRED, tps).result(timeout=30)
    assert {(tp.topic, tp.partition) for tp in result} == {("elected", 0), ("elected", 1)}
    codes = {err.code() for err in result.values()}
    assert codes == {ck.KafkaError.ELECTION_NOT_NEEDED}
