"""Brokers as separate processes: SIGKILL of the controller's broker, SIGTERM of a leader, a
restart while the broker id is still registered."""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

SESSION_TIMEOUT_S = 6.0
# a generous deadline (a loaded CI machine), never a measure: what is asserted is what the
# cluster decided (controller epoch, registrations, leader epochs)
DEADLINE_S = 4 * SESSION_TIMEOUT_S + 10


def test_sigkill_of_the_controller_elects_a_new_one_after_its_session_expires(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    assert sorted(cluster.zk.get_all_brokers()) == [1, 2, 3]
    first = cluster.wait_for_controller()
    epoch = cluster.zk.get_controller_epoch()
    assert epoch is not None
    cluster.kill(first)
    new = cluster.wait_for_controller(timeout=DEADLINE_S, other_than=first)
    # the new controller was elected because the dead one's session expired: its ephemeral
    # registration is gone, and the controller epoch moved by exactly one election
    assert new != first
    assert first not in cluster.zk.get_all_brokers()
    assert cluster.zk.get_controller_epoch()[0] == epoch[0] + 1  # type: ignore[index]


def test_sigterm_moves_leadership_before_the_broker_exits(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    controller = cluster.wait_for_controller()
    victim = next(b for b in (1, 2, 3) if b != controller)
    assignment = {p: z.ReplicaAssignment(tuple(sorted({1, 2, 3}, key=lambda b: (b != victim, b))))
                  for p in range(4)}  # fmt: skip
    cluster.zk.create_topic("term", uuid.uuid4(), assignment, {})
    tps = [TopicPartition("term", p) for p in range(4)]
    deadline = time.monotonic() + 20
    while len(cluster.zk.get_topic_partition_states(tps)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(s.leader == victim for s in cluster.zk.get_topic_partition_states(tps).values())
    cluster.brokers[victim].signal(signal.SIGTERM)
    assert cluster.brokers[victim].wait(60) == 0
    states = cluster.zk.get_topic_partition_states(tps)
    assert all(s.leader not in (victim, -1) for s in states.values()), states
    assert all(victim not in s.isr for s in states.values())
    out = "".join(cluster.brokers[victim].output)
    assert "controlled shutdown succeeded" in out, out[-2000:]


def test_sigkill_of_a_leader_gives_its_partitions_leaders_from_their_isr(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    controller = cluster.wait_for_controller()
    victim = next(b for b in (1, 2, 3) if b != controller)
    order = [victim] + [b for b in (1, 2, 3) if b != victim]
    cluster.zk.create_topic("k", uuid.uuid4(), {p: z.ReplicaAssignment(tuple(order)) for p in range(3)}, {})
    tps = [TopicPartition("k", p) for p in range(3)]
    deadline = time.monotonic() + 20
    while len(cluster.zk.get_topic_partition_states(tps)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = cluster.zk.get_topic_partition_states(tps)
    assert all(s.leader == victim for s in before.values())
    killed = time.monotonic()
    cluster.kill(victim)
    while time.monotonic() - killed < DEADLINE_S:
        states = cluster.zk.get_topic_partition_states(tps)
        if all(s.leader not in (victim, -1) for s in states.values()):
            break
        time.sleep(0.05)
    states = cluster.zk.get_topic_partition_states(tps)
    for tp, s in states.items():
        assert s.leader == order[1] and s.leader in before[tp].isr  # the next ISR member
        assert s.leader_epoch == before[tp].leader_epoch + 1 and victim not in s.isr


def test_sigterm_of_a_leader_under_an_acks_all_producer(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("acks", num_partitions=3, replication_factor=3)])["acks"].result(30)
    errors: list[str] = []
    delivered: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(int(msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 5, "enable.idempotence": True})  # fmt: skip
    leader0 = admin.list_topics(topic="acks", timeout=10).topics["acks"].partitions[0].leader
    for i in range(300):
        producer.produce("acks", value=str(i).encode(), partition=i % 3, on_delivery=on_delivery)
        producer.poll(0)
        if i == 100:
            producer.flush(30)
            cluster.brokers[leader0].signal(signal.SIGTERM)  # controlled shutdown under load
    assert producer.flush(60) == 0
    assert cluster.brokers[leader0].wait(60) == 0
    assert errors == []
    assert sorted(delivered) == list(range(300))
    states = cluster.zk.get_topic_partition_states([TopicPartition("acks", p) for p in range(3)])
    assert all(s.leader != leader0 for s in states.values())
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "acks-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.assign([ConfluentTopicPartition("acks", p, 0) for p in range(3)])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    while len(seen) < 300 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(int(msg.value()))
    consumer.close()
    assert sorted(seen) == list(range(300))


def test_sigkill_of_a_leader_under_an_acks_all_producer(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("kill", num_partitions=3, replication_factor=3)])["kill"].result(30)
    errors: list[str] = []
    delivered: list[int] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(int(msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})  # fmt: skip
    leader0 = admin.list_topics(topic="kill", timeout=10).topics["kill"].partitions[0].leader
    for i in range(200):
        producer.produce("kill", value=str(i).encode(), partition=i % 3, on_delivery=on_delivery)
        producer.poll(0)
        if i == 100:
            producer.flush(30)
            cluster.kill(leader0)  # no controlled shutdown: the session expires (6 s)
    assert producer.flush(60) == 0
    assert errors == []
    assert sorted(delivered) == list(range(200))
    states = cluster.zk.get_topic_partition_states([TopicPartition("kill", p) for p in range(3)])
    assert all(s.leader not in (leader0, -1) and leader0 not in s.isr for s in states.values())
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "kill-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.assign([ConfluentTopicPartition("kill", p, 0) for p in range(3)])
    seen: list[int] = []
    deadline = time.monotonic() + 30
    while len(seen) < 200 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(int(msg.value()))
    consumer.close()
    assert sorted(seen) == list(range(200))


def test_a_broker_whose_id_another_session_holds_refuses_to_start(
    zookeeper_server: ZooKeeperServer,
) -> None:
    """As Kafka's CheckedEphemeral: the id's znode held by another ZooKeeper session (after a
    SIGKILL, the dead process's until it expires) makes the broker exit at start, and
    start() says so rather than returning a dead broker; start_broker() waits the
    registration out."""
    with EmbeddedCluster(brokers=1, zookeeper=zookeeper_server) as cluster:
        broker = cluster.brokers[1]
        path = z.broker_path(1)
        registration, _ = cluster.zk.zk.get(path)
        cluster.stop_broker(1)  # controlled: its own session ends, the znode goes
        other = KafkaZkClient(cluster.zookeeper_connect)
        other.start()
        try:
            other.zk.create(path, registration, ephemeral=True)
            with pytest.raises(RuntimeError, match="broker id 1 is registered by another broker"):
                broker.start()
            assert not broker.running
        finally:
            other.close()  # its ephemeral znode goes with the session
        cluster.start_broker(1)
        first = cluster.zk.get_broker(1)
        assert broker.running and first is not None
        cluster.kill(1)
        assert cluster.zk.get_broker(1) is not None  # the killed process's session lives on
        cluster.start_broker(1)
        again = cluster.zk.get_broker(1)
        assert broker.running and again is not None and again.epoch > first.epoch
