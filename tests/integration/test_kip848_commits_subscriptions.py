"""confluent-kafka (librdkafka) with ``group.protocol=consumer`` against the broker:
offsets committed without a subscription (manual assignment, Kafka's simple groups) and
subscription changes (a deleted topic, regex plus literal topics, many changes in a row)."""

from __future__ import annotations

import random
import re
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


# ------------------------------------------------------------------ subscription changes


def assigned(c: Consumer) -> set[tuple[str, int]]:
    return {(p.topic, p.partition) for p in c.assignment()}


def parts(topic: str, n: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(n)}


def test_deleting_one_subscribed_topic_revokes_only_its_partitions(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, ("del-f", 2), ("del-g", 3))
    c = consumer(broker, "g-del")
    try:
        c.subscribe(["del-f", "del-g"])
        wait_for(lambda: assigned(c) == parts("del-f", 2) | parts("del-g", 3),
                 lambda: c.poll(0.05), what="f and g assigned")
        admin.delete_topics(["del-f"])["del-f"].result(10)
        wait_for(lambda: assigned(c) == parts("del-g", 3), lambda: c.poll(0.05),
                 what="only g left")
        group = broker.broker.group_coordinator.consumer.groups["g-del"]
        [member] = group.members.values()
        assert sum(len(ps) for ps in member.assigned.values()) == 3
        for _ in range(20):  # and it stays so
            c.poll(0.05)
        assert assigned(c) == parts("del-g", 3)
    finally:
        c.close()


TOPICS = ["sub-re-a", "sub-re-b", "sub-lit", "sub-other-1", "sub-other-2"]


def expected(subscription: list[str]) -> set[str]:
    out: set[str] = set()
    for s in subscription:
        out |= {t for t in TOPICS if re.fullmatch(s[1:], t)} if s.startswith("^") else {s}
    return out


def test_a_hundred_subscription_changes_each_converge(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, *((t, 2) for t in TOPICS))
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rnd = random.Random(seed)
    c = consumer(broker, "g-churn")
    choices = [*TOPICS, "^sub-re-.*", "^sub-other-.*"]
    try:
        for i in range(100):
            if i % 7 == 6 or i == 99:
                c.unsubscribe()
                want: set[str] = set()
            else:
                subscription = rnd.sample(choices, rnd.randint(1, 3))
                c.subscribe(subscription)
                want = expected(subscription)
            wait_for(lambda want=want: {t for t, _ in assigned(c)} == want
                     and len(assigned(c)) == 2 * len(want), lambda: c.poll(0.02),
                     timeout=CONFIG["group.consumer.session.timeout.ms"] / 1000,
                     what=f"change {i}: {sorted(want)}")
        group = broker.broker.group_coordinator.consumer.groups["g-churn"]
        wait_for(lambda: not group.members, lambda: c.poll(0.02),
                 what="the member gone after the last change, an unsubscribe")
    finally:
        c.close()


def test_a_later_subscription_replaces_the_regex(
        broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, *((t, 2) for t in TOPICS))
    c = consumer(broker, "g-regex")
    given: list[set[str]] = []
    try:
        c.subscribe(["^sub-re-.*", "sub-lit"],
                    on_assign=lambda _c, ps: given.append({p.topic for p in ps}))
        wait_for(lambda: {t for t, _ in assigned(c)} == {"sub-re-a", "sub-re-b", "sub-lit"},
                 lambda: c.poll(0.02), what="the regex and the literal topic")
        # resolved asynchronously, as Kafka: the literal topic first, the matches after
        assert given[0] == {"sub-lit"} and set().union(*given[1:]) == {"sub-re-a", "sub-re-b"}
        c.subscribe(["sub-other-1"])
        wait_for(lambda: {t for t, _ in assigned(c)} == {"sub-other-1"},
                 lambda: c.poll(0.02), what="the regex replaced")
        group = broker.broker.group_coordinator.consumer.groups["g-regex"]
        [member] = group.members.values()
        assert not member.subscription.subscribed_topic_regex  # cleared
        assert member.subscription.subscribed_topic_names == ("sub-other-1",)
    finally:
        c.close()
