"""The same consumer-group scenarios under both group protocols, on one broker and on three:
confluent-kafka (librdkafka) consumers with ``group.protocol=classic`` (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup; the client's leader assigns) and ``group.protocol=consumer`` (KIP-848's
ConsumerGroupHeartbeat; the broker assigns), against an ``EmbeddedBroker`` and against three
``tidelog serve`` processes in one ZooKeeper cluster (``EmbeddedCluster``).

Session timeouts stay at Kafka's 45 s and every wait here is shorter: a member that leaves
is seen gone by its LeaveGroup (or its epoch -1 heartbeat), never by its session ending.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_group_members import Kafka, Member, first_offset, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tidelog.testing import EmbeddedBroker, EmbeddedCluster

CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 1000,
    "offsets.topic.num.partitions": 3,
}
PROTOCOLS = ["classic", "consumer"]
# wait_for's deadline, 30 s, is below both protocols' session timeout (45 s): what happens
# in time is the members' doing


class Brokers:
    def __init__(self, kafka: Kafka, replicas: int) -> None:
        self.bootstrap_servers = kafka.bootstrap_servers
        self.replicas = replicas
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})

    def create(self, topic: str, partitions: int) -> None:
        new = NewTopic(topic, partitions, self.replicas)
        self.admin.create_topics([new])[topic].result(30)

    def produce(self, topic: str, partition: int, count: int) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap_servers, "acks": "all"})
        for i in range(count):
            p.produce(topic, str(i).encode(), partition=partition)
        assert p.flush(30) == 0

    def close(self) -> None:
        del self.admin  # librdkafka's handle goes before the brokers do


@pytest.fixture(scope="module", params=[1, 3], ids=["1-broker", "3-brokers"])
def brokers(request: pytest.FixtureRequest) -> Iterator[Brokers]:
    if request.param == 1:
        with EmbeddedBroker(CONFIG) as broker:
            one = Brokers(broker, 1)
            yield one
            one.close()
    else:
        zookeeper = request.getfixturevalue("zookeeper_server")
        with EmbeddedCluster(brokers=3, config=CONFIG, zookeeper=zookeeper) as cluster:
            three = Brokers(cluster, 3)
            yield three
            three.close()


def config(protocol: str, **conf: Any) -> dict[str, Any]:
    """A consumer of ``protocol``; a classic one with a 500 ms heartbeat (the consumer
    protocol's interval is the broker's ``group.consumer.heartbeat.interval.ms``)."""
    own = {"heartbeat.interval.ms": 500} if protocol == "classic" else {}
    return {"group.protocol": protocol, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000, **own, **conf}


@pytest.fixture
def members() -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for m in made:
        m.close()


def split(group: list[Member], n: int, shares: list[int]) -> Callable[[], bool]:
    """The members hold partitions 0..n-1 between them, each once, in these shares."""
    def check() -> bool:
        held = [m.partitions() for m in group]
        got = [p for ps in held for p in ps]
        return sorted(got) == list(range(n)) and sorted(len(ps) for ps in held) == shares
    return check


def start(brokers: Brokers, protocol: str, name: str, partitions: int, count: int,
          **conf: Any) -> list[Member]:
    """A topic and a group, both named ``name``-``protocol``, and ``count`` members of it."""
    topic = f"{name}-{protocol}"
    brokers.create(topic, partitions)
    return [Member(brokers, topic, [topic], **config(protocol, **conf)) for _ in range(count)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_members_join_and_a_leaving_member_hands_its_partitions_back(
        brokers: Brokers, protocol: str, members: list[Member]) -> None:
    members += start(brokers, protocol, "join", 4, 2)
    wait_for(split(members, 4, [2, 2]), what="2/2")
    first, second = members
    first.close()
    wait_for(split([second], 4, [4]), what="every partition to the member that stayed")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_partitions_added_to_the_topic_are_assigned(
        brokers: Brokers, protocol: str, members: list[Member]) -> None:
    members += start(brokers, protocol, "grow", 2, 2)
    wait_for(split(members, 2, [1, 1]), what="1/1")
    topic = f"grow-{protocol}"
    brokers.admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    wait_for(split(members, 4, [2, 2]), what="2/2 of the four partitions")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_static_member_restarted_gets_its_partitions_back_without_a_rebalance(
        brokers: Brokers, protocol: str, members: list[Member]) -> None:
    topic = f"static-{protocol}"
    brokers.create(topic, 4)
    first, other = (Member(brokers, topic, [topic], **config(protocol, **{
        "group.instance.id": f"host-{i}"})) for i in (1, 2))
    members += [first, other]
    wait_for(split(members, 4, [2, 2]), what="2/2")
    held, theirs = first.partitions(), other.partitions()
    settled = time.monotonic()
    # a static member leaves without LeaveGroup (classic) or with epoch -2 (consumer): its
    # partitions wait for it until its session ends
    first.close()
    again = Member(brokers, topic, [topic], **config(protocol, **{"group.instance.id": "host-1"}))
    members.append(again)
    wait_for(lambda: again.partitions() == held, what="the same partitions back")
    assert other.partitions() == theirs
    assert other.revoked_since(settled) == set()  # nobody rebalanced


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_committed_offsets_are_where_the_next_consumer_of_the_group_starts(
        brokers: Brokers, protocol: str) -> None:
    topic = group = f"offsets-{protocol}"
    brokers.create(topic, 2)
    brokers.produce(topic, 0, 10)
    conf = {"bootstrap.servers": brokers.bootstrap_servers, "group.id": group,
            **config(protocol, **{"enable.auto.commit": False})}
    c = Consumer(conf)
    c.subscribe([topic])
    seen: list[int | None] = []
    deadline = time.monotonic() + 30
    while len(seen) < 6 and time.monotonic() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is None:
            seen.append(msg.offset())
    assert seen == list(range(6))
    c.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    c.close()
    c = Consumer(conf)
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 6
        c.subscribe([topic])
        assert first_offset(c, 0) == 6
    finally:
        c.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_fourth_member_takes_one_partition_and_no_one_else_stops(
        brokers: Brokers, protocol: str, members: list[Member]) -> None:
    """Cooperative assignment: the classic protocol with librdkafka's cooperative-sticky
    assignor (KIP-429), the consumer protocol's broker-side assignor (incremental by
    design). Members give up only the partitions that move."""
    conf = ({"partition.assignment.strategy": "cooperative-sticky"}
            if protocol == "classic" else {})
    members += start(brokers, protocol, "coop", 6, 3, **conf)
    wait_for(split(members, 6, [2, 2, 2]), what="2/2/2")
    before = [m.partitions() for m in members]
    joined = time.monotonic()
    topic = f"coop-{protocol}"
    fourth = Member(brokers, topic, [topic], **config(protocol, **conf))
    members.append(fourth)
    wait_for(split(members, 6, [1, 1, 2, 2]), what="the fourth member's share")
    moved = 0
    for m, had in zip(members, before, strict=False):
        kept = m.partitions()
        assert kept <= had
        assert m.revoked_since(joined) == had - kept  # only what moved was revoked
        moved += len(had - kept)
    assert moved == len(fourth.partitions()) == 1
