"""KIP-932 behaviours with confluent-kafka's ``ShareConsumer`` (librdkafka's share consumer)
against the broker: whole batches acquired, a re-created topic starting fresh, records
acknowledged by offset, a close with partial acknowledgements, and Kafka's SimpleAssignor
spreading partitions over the members."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.server.coordinator.group.share.partition import SharePartition
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

LOCK_MS = 30_000  # far beyond every wait below: what comes back was released, not expired
CONFIG = {
    "group.share.heartbeat.interval.ms": 200,
    "group.share.record.lock.duration.ms": LOCK_MS,
    "offsets.topic.num.partitions": 1,
}


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


@pytest.fixture
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def wait_for(cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def consumer(broker: EmbeddedBroker, group: str, **conf: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                          **conf})


def share_partition(broker: EmbeddedBroker, group: str, topic: str,
                    partition: int = 0) -> SharePartition | None:
    share = broker.broker.group_coordinator.share
    return share.partitions.get((group, TopicPartition(topic, partition)))


def open_partitions(broker: EmbeddedBroker, group: str, topic: str, n: int,
                    consumers: list[ShareConsumer]) -> None:
    """Poll until the group's share-partitions exist (share.auto.offset.reset latest:
    records produced before would never be delivered)."""
    def opened() -> bool:
        for c in consumers:
            c.poll(0.05)
        return all(share_partition(broker, group, topic, p) is not None for p in range(n))
    wait_for(opened, what="the share-partitions")


def produce(broker: EmbeddedBroker, topic: str, count: int, partition: int = 0,
            one_batch: bool = False) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers,
                  "linger.ms": 1000 if one_batch else 0})
    for i in range(count):
        p.produce(topic, str(i).encode(), partition=partition)
    p.flush(10)


def poll_until(c: ShareConsumer, want: int, timeout: float = 30.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += [m for m in c.poll(0.1) if m.error() is None]
    return got


def holding(broker: EmbeddedBroker, admin: AdminClient, topic: str, group: str,
            count: int) -> tuple[ShareConsumer, list[Message]]:
    """A topic of one partition, a member of ``group`` acknowledging explicitly, subscribed
    to it, and the ``count`` records produced next as it polled them."""
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    c = consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    open_partitions(broker, group, topic, 1, [c])
    produce(broker, topic, count)
    return c, poll_until(c, count)


def test_a_poll_returns_the_whole_batch_beyond_max_poll_records(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    admin.create_topics([NewTopic("batches", 1, 1)])["batches"].result(10)
    c = consumer(broker, "sg-batches", **{"max.poll.records": "5"})
    try:
        c.subscribe(["batches"])
        open_partitions(broker, "sg-batches", "batches", 1, [c])
        produce(broker, "batches", 12, one_batch=True)  # one batch of 12 records
        first: list[Message] = []
        deadline = time.monotonic() + 30
        while not first and time.monotonic() < deadline:
            first = [m for m in c.poll(0.2) if m.error() is None]
        # Kafka acquires whole batches: max.poll.records is a soft limit
        assert [m.offset() for m in first] == list(range(12))
    finally:
        c.close()


def test_a_recreated_topic_starts_with_fresh_share_state(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic, group = "recreated", "sg-recreated"
    first, held = holding(broker, admin, topic, group, 5)
    assert [m.delivery_count() for m in held] == [1] * 5
    first.close()  # unacknowledged: released, the share-partition remembers a delivery
    admin.delete_topics([topic])[topic].result(10)
    wait_for(lambda: share_partition(broker, group, topic) is None,
             what="the share-partition deleted with its topic")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    again = consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        again.subscribe([topic])
        open_partitions(broker, group, topic, 1, [again])
        produce(broker, topic, 5)
        got = poll_until(again, 5)
        assert [(m.offset(), m.delivery_count()) for m in got] == [(i, 1) for i in range(5)]
    finally:
        again.close()


def test_records_acknowledged_by_offset_go_to_no_other_member(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic, group = "by-offset", "sg-by-offset"
    a, held = holding(broker, admin, topic, group, 10)
    assert sorted(m.offset() for m in held) == list(range(10))
    for m in held[:5]:  # by coordinates only
        a.acknowledge_offset(topic, 0, m.offset(), AcknowledgeType.ACCEPT)
    a.commit_sync(10)
    for m in held[5:]:  # these go with the close, alongside the member's leave
        a.acknowledge_offset(topic, 0, m.offset(), AcknowledgeType.ACCEPT)
    a.close()
    sp = share_partition(broker, group, topic)
    assert sp is not None
    wait_for(lambda: sp.start_offset == 10, what="all ten accepted")
    b = consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        b.subscribe([topic])
        extra: list[Message] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            extra += [m for m in b.poll(0.1) if m.error() is None]
        assert extra == []
    finally:
        b.close()


def test_acknowledgements_sent_just_before_the_close_count(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    """commit_async, then close at once (confluent-kafka's own integration test): the
    ShareAcknowledge may reach the broker after the member's leave heartbeat (they go on
    different connections); Kafka checks only the share session, which outlives the leave
    by a heartbeat interval here, so the acknowledgements still count."""
    topic, group = "async-close", "sg-async-close"
    a, held = holding(broker, admin, topic, group, 3)
    assert sorted(m.offset() for m in held) == [0, 1, 2]
    for m in held:
        a.acknowledge(m, AcknowledgeType.ACCEPT)
    a.commit_async()
    a.close()
    sp = share_partition(broker, group, topic)
    assert sp is not None
    wait_for(lambda: sp.start_offset == 3, timeout=10, what="the three accepted")


def test_close_with_partial_acknowledgements(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic, group = "partial", "sg-partial"
    a, held = holding(broker, admin, topic, group, 10)
    assert sorted(m.offset() for m in held) == list(range(10))
    for m in held:
        if m.offset() < 4:
            a.acknowledge(m, AcknowledgeType.ACCEPT)
    closed = time.monotonic()
    a.close()  # sends 0..3 accepted; 4..9 are released at once
    b = consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        b.subscribe([topic])
        again = poll_until(b, 6)
        took = time.monotonic() - closed
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [
            (o, 1) for o in range(4, 10)]  # a release on close is no delivery
        assert took < LOCK_MS / 1000  # released, not expired
        for m in again:
            b.acknowledge(m, AcknowledgeType.ACCEPT)
        b.commit_sync(10)
        more: list[Message] = []
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            more += [m for m in b.poll(0.1) if m.error() is None]
        assert more == []  # 0..3 never again
    finally:
        b.close()


def assigned(broker: EmbeddedBroker, group: str) -> dict[str, set[int]]:
    g = broker.broker.group_coordinator.share.groups.get(group)
    if g is None:
        return {}
    return {mid: {p for ps in m.assigned.values() for p in ps} for mid, m in g.members.items()}


def sessions_match(broker: EmbeddedBroker, group: str) -> bool:
    """Every member's share session names exactly the partitions assigned to it."""
    share = broker.broker.group_coordinator.share
    for member, parts in assigned(broker, group).items():
        session = share.sessions.get((group, member))
        if session is None or {p for _, p in session.partitions} != parts:
            return False
    return True


def test_the_simple_assignor_spreads_partitions_over_members(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    topic, group = "spread", "sg-spread"
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(10)
    implicit = consumer(broker, group)
    explicit = consumer(broker, group, **{"share.acknowledgement.mode": "explicit"})
    members = [implicit, explicit]
    others: list[ShareConsumer] = []
    try:
        for c in members:
            c.subscribe([topic])
        open_partitions(broker, group, topic, 4, members)
        # two each, and each member's share session names its own two only: a ShareFetch
        # of the first member's session from before the second joined (all four) would
        # acquire every record, as Kafka's broker would (a share fetch may name any partition)
        wait_for(lambda: [c.poll(0.02) for c in members]
                 and sorted(map(len, assigned(broker, group).values())) == [2, 2]
                 and sessions_match(broker, group), what="two partitions each, fetched")
        for p in range(4):
            produce(broker, topic, 100, partition=p)
        got: list[list[tuple[int, int]]] = [[], []]
        deadline = time.monotonic() + 60
        while sum(map(len, got)) < 400 and time.monotonic() < deadline:
            for i, c in enumerate(members):  # in turns
                for m in c.poll(0.1):
                    assert m.error() is None, m.error()
                    got[i].append((m.partition(), m.offset()))
                    if c is explicit:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
        print(f"records per member {[len(g) for g in got]}")
        assert sorted(got[0] + got[1]) == sorted((p, o) for p in range(4) for o in range(100))
        assert got[0] and got[1]
        assert not {p for p, _ in got[0]} & {p for p, _ in got[1]}  # one member a partition
        # a third member joins: 2/1/1; then five members on four partitions share
        others = [consumer(broker, group) for _ in range(3)]
        others[0].subscribe([topic])
        wait_for(lambda: (implicit.poll(0.02), explicit.poll(0.02), others[0].poll(0.02))
                 and sorted(map(len, assigned(broker, group).values())) == [1, 1, 2],
                 what="2/1/1 after a join")
        for c in others[1:]:
            c.subscribe([topic])
        everyone = [*members, *others]
        wait_for(lambda: [c.poll(0.02) for c in everyone]
                 and sorted(map(len, assigned(broker, group).values())) == [1, 1, 1, 1, 1],
                 what="one partition each for five members")
        parts = [p for ps in assigned(broker, group).values() for p in ps]
        assert set(parts) == {0, 1, 2, 3}  # every partition consumed, one of them shared
        for c in others:
            c.close()
        others = []
        wait_for(lambda: (implicit.poll(0.02), explicit.poll(0.02))
                 and sorted(map(len, assigned(broker, group).values())) == [2, 2],
                 what="2/2 after three left")
    finally:
        for c in [*members, *others]:
            c.close()
