"""confluent-kafka (librdkafka) with ``group.protocol=consumer`` against the broker:
offsets committed without a subscription (manual assignment, Kafka's simple groups) and
subscription changes (a deleted topic, regex plus literal topics, many changes in a row)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedBroker

CONFIG = {
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 100,
    "offsets.topic.num.partitions": 1,
}


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


@pytest.fixture
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(admin: AdminClient, *topics: tuple[str, int]) -> None:
    fs = admin.create_topics([NewTopic(t, n, 1) for t, n in topics])
    for f in fs.values():
        f.result(10)


def consumer(broker: EmbeddedBroker, group: str, **conf: str | int | bool) -> Consumer:
    return Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "topic.metadata.refresh.interval.ms": 500, **conf})


def wait_for(cond: Callable[[], bool], poll: Callable[[], object], timeout: float = 30.0,
             what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll()
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ standalone commits


def test_a_consumer_that_never_subscribed_commits_and_reads_back(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, ("solo", 2))
    c = consumer(broker, "g-solo")
    try:
        c.commit(offsets=[TopicPartition("solo", 0, 1)], asynchronous=False)
        [got] = c.committed([TopicPartition("solo", 0)], 10)
        assert got.offset == 1 and got.error is None
        assert "g-solo" in broker.broker.group_coordinator.groups  # a simple group
    finally:
        c.close()


def test_assigned_consumers_commit_sync_async_and_automatically(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    from confluent_kafka import Producer
    create(admin, ("manual", 3))
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(30):
        p.produce("manual", str(i).encode(), partition=i % 3)
    p.flush(10)
    done: list[KafkaError | None] = []
    c = consumer(broker, "g-manual", **{"enable.auto.commit": True,
                                        "auto.commit.interval.ms": 100},
                 on_commit=lambda err, _parts: done.append(err))
    try:
        c.assign([TopicPartition("manual", 0, 0)])
        c.incremental_assign([TopicPartition("manual", 1, 0), TopicPartition("manual", 2, 0)])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen += 1
        assert seen == 30
        c.commit(offsets=[TopicPartition("manual", 0, 10)], asynchronous=False)
        c.commit(offsets=[TopicPartition("manual", 1, 10)], asynchronous=True)
        # the auto-commit then the asynchronous one report back through on_commit
        wait_for(lambda: len(done) >= 2, lambda: c.poll(0.05), what="commit callbacks")
        assert all(e is None for e in done), done
        positions = c.committed([TopicPartition("manual", p) for p in range(3)], 10)
        assert [t.offset for t in positions] == [10, 10, 10]
    finally:
        c.close()


def test_a_commit_without_membership_is_refused_while_the_group_has_members(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, ("busy", 1))
    member = consumer(broker, "g-busy")
    solo = consumer(broker, "g-busy")
    try:
        member.subscribe(["busy"])
        wait_for(lambda: len(member.assignment()) == 1, lambda: member.poll(0.05),
                 what="the member's assignment")
        with pytest.raises(KafkaException) as refused:
            solo.commit(offsets=[TopicPartition("busy", 0, 3)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        member.close()
        solo.close()
