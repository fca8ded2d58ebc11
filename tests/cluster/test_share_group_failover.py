"""Share-group state moves with leadership (KIP-932 on three broker processes, ZooKeeper
session timeout 6 s): a confluent-kafka ShareConsumer's accepted records stay accepted after
the SIGKILL of the share coordinator's broker (the leader of the share-partition's
``__share_group_state`` partition) and after the SIGKILL of the broker leading the data
partition; the records it held unacknowledged are delivered again, and it carries on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.server.coordinator.share.records import SHARE_STATE_TOPIC, state_partition_for
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

DEADLINE_S = 90.0
STATE_PARTITIONS = 3
LOCK_MS = 15_000  # outlasts a kill; a record not accepted comes back within it
CONFIG = {
    "offsets.topic.num.partitions": 3,
    "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
    "group.share.heartbeat.interval.ms": 500,
    "group.share.record.lock.duration.ms": LOCK_MS,
    # a killed follower leaves the ISR soon, so acks=all writes of the share state go on
    "replica.lag.time.max.ms": 5000,
}
COUNT = 20


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers=3, config=CONFIG, zookeeper=zookeeper_server) as c:
        yield c


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def leader(cluster: EmbeddedCluster, tp: TopicPartition) -> int:
    state = cluster.zk.get_topic_partition_states([tp]).get(tp)
    return -1 if state is None else int(state.leader)


def full_isr(cluster: EmbeddedCluster, tps: list[TopicPartition]) -> bool:
    states = cluster.zk.get_topic_partition_states(tps)
    return all(tp in states and len(states[tp].isr) == 3 for tp in tps)


def topic_id(cluster: EmbeddedCluster, topic: str) -> uuid.UUID:
    found = cluster.zk.get_topic_assignment(topic)
    assert found is not None and found[0].topic_id is not None
    return found[0].topic_id


def consumer(cluster: EmbeddedCluster, group: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})


def warm_up(cluster: EmbeddedCluster, c: ShareConsumer, topic: str) -> None:
    """The share-partition starts at the high watermark when first fetched: produce until
    the consumer gets a record, so the records produced next are all its."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        p.produce(topic, b"warm-up", partition=0)
        p.flush(10)
        got = c.poll(1.0)
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if got:
            c.commit_sync(30)
            return
    raise AssertionError(f"no record of {topic} reached the share consumer")


def poll_held(c: ShareConsumer, skip: Callable[[bytes], bool], what: str) -> list[Message]:
    """Poll until some record arrives that ``skip`` does not accept (those it does are
    accepted on the way): the messages of that poll, held unacknowledged."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        held = []
        for m in c.poll(0.5):
            if m.error() is not None:
                continue
            if m.value() == b"warm-up" or skip(m.value()):
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            else:
                held.append(m)
        if held:
            return held
        c.commit_sync(60)
    raise AssertionError(f"no record to hold {what}")


def commit(c: ShareConsumer) -> list[str]:
    """commit_sync; the partitions' errors (none expected)."""
    return [str(e) for e in c.commit_sync(60).values() if e is not None]


def test_accepted_records_survive_the_share_coordinator_and_the_partition_leader(
        cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for topic in ("jobs", "warm"):
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    warm = consumer(cluster, "sg-warm")
    warm.subscribe(["warm"])
    warm_up(cluster, warm, "warm")  # creates __share_group_state
    warm.close()
    state_tps = [TopicPartition(SHARE_STATE_TOPIC, p) for p in range(STATE_PARTITIONS)]
    jobs = TopicPartition("jobs", 0)
    wait_for(lambda: full_isr(cluster, [*state_tps, jobs]), "full ISRs")
    data_leader = leader(cluster, jobs)
    tid = topic_id(cluster, "jobs")
    # a group whose share coordinator is not the data partition's leader
    group, coordinator = next(
        (g, b) for g, b in ((f"sg-{i}", leader(cluster, state_tps[state_partition_for(
            f"sg-{i}", tid, 0, STATE_PARTITIONS)])) for i in range(100))
        if b not in (-1, data_leader))
    c = consumer(cluster, group)
    try:
        c.subscribe(["jobs"])
        warm_up(cluster, c, "jobs")
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        values = [f"r{i}".encode() for i in range(COUNT)]
        for v in values:
            p.produce("jobs", v, partition=0)
        assert p.flush(30) == 0
        first = set(values[:10])
        held = poll_held(c, lambda v: v in first, "after r0..r9")
        assert commit(c) == []  # r0..r9 accepted, stored by the share coordinator
        # The share coordinator's broker dies: what is acknowledged now is written through
        # the state partition's next leader.
        cluster.kill(coordinator)
        killed = time.monotonic()
        accepted_late = {m.value() for m in held[:2]}
        for m in held:
            c.acknowledge(m, AcknowledgeType.ACCEPT if m.value() in accepted_late
                          else AcknowledgeType.RELEASE)
        assert commit(c) == []
        print(f"acknowledged through the new share coordinator "
              f"{(time.monotonic() - killed) * 1000:.0f} ms after its broker was killed")
        done = first | accepted_late
        held = poll_held(c, lambda v: False, "after the share coordinator's kill")
        assert not done & {m.value() for m in held}
        unacked = {m.value() for m in held}
        cluster.restart(coordinator)
        wait_for(lambda: full_isr(cluster, [*state_tps, jobs]), "full ISRs again")
        cluster.kill(data_leader)  # holding ``unacked``, never acknowledged
        killed = time.monotonic()
        for m in held:  # sent with the next fetch; refused: not acquired at the new leader
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        seen: dict[bytes, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        while not set(values) - done <= set(seen) and time.monotonic() < deadline:
            for m in c.poll(0.5):
                if m.error() is None:
                    assert m.value() not in done, f"{m.value()!r} came back"
                    seen[m.value()] = m.delivery_count()
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            commit(c)  # may also carry the refused acknowledgements of ``held``
        print(f"{len(unacked)} held records delivered again "
              f"{(time.monotonic() - killed) * 1000:.0f} ms after the data partition's "
              f"leader was killed")
        assert set(seen) == set(values) - done  # the rest, each once; nothing accepted
        assert unacked <= set(seen)
        assert leader(cluster, jobs) not in (-1, data_leader)
        # every record accepted exactly once: one not accepted would come back once its
        # lock ran out
        late: list[bytes] = []
        deadline = time.monotonic() + LOCK_MS / 1000 + 2
        while time.monotonic() < deadline:
            late += [m.value() for m in c.poll(0.5) if m.error() is None]
        assert late == []
    finally:
        c.close()
