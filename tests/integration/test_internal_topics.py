"""`__consumer_offsets` belongs to the group coordinator: clients can't write or delete it,
and deleting a user topic drops its committed offsets (Kafka's cleanupGroupMetadata)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.testing.embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"offsets.topic.num.partitions": "2"}) as b:
        yield b


def _commit(bs: str, group: str, topic: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        c.close()


def _committed(bs: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)
    finally:
        c.close()


def _create(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def test_clients_cannot_produce_to_the_offsets_topic(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    _create(admin, "user-topic")
    _commit(bs, "g-internal", "user-topic", 3)  # creates __consumer_offsets
    errors: list[KafkaError | None] = []
    cp = Producer({"bootstrap.servers": bs, "message.send.max.retries": 0})
    cp.produce(
        OFFSETS_TOPIC, b"v", key=b"k", partition=0, on_delivery=lambda e, m: errors.append(e)
    )
    cp.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION  # Kafka's INVALID_TOPIC_EXCEPTION (17)
    assert _committed(bs, "g-internal", "user-topic") == 3  # the coordinator still works


def test_offsets_topic_cannot_be_deleted(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    _create(admin, "another-topic")
    _commit(bs, "g-del", "another-topic", 1)
    with pytest.raises(KafkaException, match=r"TOPIC_DELETION_DISABLED|cannot be deleted"):
        admin.delete_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC].result(30)
    assert OFFSETS_TOPIC in admin.list_topics(timeout=30).topics


def test_deleting_a_topic_drops_its_committed_offsets(broker: EmbeddedBroker) -> None:
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    _create(admin, "short-lived")
    _commit(bs, "g-gone", "short-lived", 42)
    assert _committed(bs, "g-gone", "short-lived") == 42
    admin.delete_topics(["short-lived"])["short-lived"].result(30)
    _create(admin, "short-lived")
    assert _committed(bs, "g-gone", "short-lived") < 0  # OFFSET_INVALID: nothing committed
