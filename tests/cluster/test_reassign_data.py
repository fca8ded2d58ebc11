"""Partition reassignment with data on three `tidelog serve` processes: a partition on brokers
[1, 2] moves to [2, 3] while an idempotent acks=all producer writes; nothing acked is lost,
the new replica's segment files equal the leader's, the replica left behind is deleted, the
leader moves off the removed broker; ListPartitionReassignments shows the move meanwhile;
a broker that is not the controller answers NOT_CONTROLLER; a cancellation reverts."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import create_topic, log_bytes, partition_dir, states, wait_for

from tidelog.cli.reassign_admin import ReassignAdmin, Reassignment
from tidelog.client.kafka_client import KafkaClient
from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition


@pytest.fixture
def admin(tidelog_cluster: EmbeddedCluster) -> Iterator[ReassignAdmin]:
    with KafkaClient(tidelog_cluster.bootstrap_servers) as client:
        yield ReassignAdmin(client)


def _assignment(cluster: EmbeddedCluster, tp: TopicPartition) -> z.ReplicaAssignment:
    got = cluster.zk.get_topic_assignment(tp.topic)
    assert got is not None
    return got[0].partitions[tp.partition]


class _Writer:
    """An idempotent acks=all producer writing unique values until stopped."""

    def __init__(self, cluster: EmbeddedCluster, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({
            "bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
            "enable.idempotence": True, "linger.ms": 5,
        })  # fmt: skip
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            value = f"{uuid.uuid4().hex}-{i}".encode() * 8
            self.producer.produce(self.topic, value=value, partition=0, on_delivery=self._delivered)
            self.producer.poll(0.002 if i % 20 else 0)
            i += 1
        self.producer.flush(60)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(90)


def _consume_all(cluster: EmbeddedCluster, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reassign-check",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([KafkaTopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: list[bytes] = []

    def more() -> bool:
        seen.extend(m.value() or b"" for m in consumer.consume(500, 0.5) if m.error() is None)
        return len(seen) >= expected

    wait_for(more, 60, "every acked record consumed")
    consumer.close()
    return seen


def test_move_with_data_while_producing(tidelog_cluster: EmbeddedCluster, admin: ReassignAdmin) -> None:
    cluster = tidelog_cluster
    tp = TopicPartition("moving", 0)
    # brokers [1, 2], broker 1 leading
    cluster.zk.create_topic(tp.topic, uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))},
                            {"min.insync.replicas": "2"})  # fmt: skip
    wait_for(lambda: (s := states(cluster, [tp]).get(tp)) is not None and len(s.isr) == 2, 30, "ISR [1, 2]")
    writer = _Writer(cluster, tp.topic)
    writer.thread.start()
    wait_for(lambda: len(writer.acked) >= 2000, 60, "records before the move")
    old_dir = partition_dir(cluster, 1, tp)
    assert old_dir.exists()

    # a broker that is not the controller refuses; the admin finds the controller
    controller = cluster.wait_for_controller()
    other = next(b for b in cluster.brokers if b != controller)
    with KafkaClient(f"127.0.0.1:{cluster.brokers[other].port}") as c:
        md = c.metadata([])
        refused = c.connection(md.brokers[other]).call(
            46, 0, {"timeout_ms": 1000, "topics": None})
        assert int(refused.error_code) == 41  # NOT_CONTROLLER

    assert admin.alter({tp: [2, 3]}) == {tp: None}
    # the move shows while broker 3 catches up (or has just completed)
    listed = admin.list()
    if listed:
        assert listed == {tp: Reassignment((2, 3, 1), (3,), (1,))}
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((2, 3)), 120, "the move completes")
    assert admin.list() == {}
    wait_for(lambda: len(writer.acked) >= 4000, 60, "records after the move")
    writer.stop()
    assert not writer.errors, writer.errors[:5]

    state = states(cluster, [tp])[tp]
    assert state.leader in (2, 3) and sorted(state.isr) == [2, 3]
    wait_for(lambda: not old_dir.exists(), 30, "the removed replica's files deleted")
    # the new replica holds the leader's bytes up to the high watermark
    leader_dir = partition_dir(cluster, state.leader, tp)
    follower_dir = partition_dir(cluster, 5 - state.leader, tp)
    wait_for(lambda: log_bytes(follower_dir) == log_bytes(leader_dir), 30, "replicas equal")
    assert len(log_bytes(leader_dir)) > 100_000

    seen = _consume_all(cluster, tp.topic, len(writer.acked))
    assert sorted(seen) == sorted(writer.acked)  # nothing lost, nothing twice


def test_leader_moves_off_a_removed_broker_and_refusals(
    tidelog_cluster: EmbeddedCluster, admin: ReassignAdmin
) -> None:
    cluster = tidelog_cluster
    [tp] = create_topic(cluster, "leaving", 1, replication_factor=1)
    leader = states(cluster, [tp])[tp].leader
    others = [b for b in sorted(cluster.brokers) if b != leader]
    assert admin.alter({tp: [others[0]]}) == {tp: None}
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((others[0],)), 60, "moved")
    assert states(cluster, [tp])[tp].leader == others[0]

    # a cancellation of nothing in progress, and an unknown partition
    gone = TopicPartition("no-such-topic", 0)
    errors = admin.alter({tp: None, gone: [1]})
    assert errors[tp] is not None and errors[tp].startswith("NO_REASSIGNMENT_IN_PROGRESS")  # type: ignore[union-attr]
    assert errors[gone] is not None and errors[gone].startswith("UNKNOWN_TOPIC_OR_PARTITION")  # type: ignore[union-attr]
    # a dead broker cannot be added
    errors = admin.alter({tp: [others[0], 99]})
    assert errors[tp] is not None and errors[tp].startswith("INVALID_REPLICA_ASSIGNMENT")  # type: ignore[union-attr]


def test_cancel_reverts_a_move_in_progress(tidelog_cluster: EmbeddedCluster, admin: ReassignAdmin) -> None:
    cluster = tidelog_cluster
    tp = TopicPartition("cancelled", 0)
    cluster.zk.create_topic(tp.topic, uuid.uuid4(), {0: z.ReplicaAssignment((1,))}, {})
    wait_for(lambda: tp in states(cluster, [tp]), 30, "the partition's state")
    # broker 3 is stopped: its replica cannot catch up, so the move stays in progress
    cluster.stop_broker(3)
    cluster.wait_for_metadata()
    # ... but the controller refuses a dead target: add broker 2, then hold it behind broker 3
    assert admin.alter({tp: [1, 2]}) == {tp: None}
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((1, 2)), 60, "grown to [1, 2]")
    cluster.brokers[3].start()
    cluster.wait_for_metadata()
    cluster.kill(2)
    wait_for(lambda: 2 not in cluster.zk.get_all_brokers(), 30, "broker 2 gone")
    assert admin.alter({tp: [1, 3, 2]}) == {tp: None}
    # 2 is dead and out of the ISR: the move waits for it
    wait_for(lambda: admin.list() == {tp: Reassignment((1, 3, 2), (3,), ())}, 30, "in progress")
    wait_for(lambda: partition_dir(cluster, 3, tp).exists(), 30, "broker 3 hosts the new replica")
    assert admin.alter({tp: None}) == {tp: None}
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((1, 2)), 30, "reverted")
    assert admin.list() == {}
    wait_for(lambda: not partition_dir(cluster, 3, tp).exists(), 30, "the added replica deleted")


def test_a_tools_move_resumes_after_controller_failover(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    controller = cluster.wait_for_controller()
    source, new = [b for b in sorted(cluster.brokers) if b != controller]
    tp = TopicPartition("resumed", 0)
    cluster.zk.create_topic(tp.topic, uuid.uuid4(), {0: z.ReplicaAssignment((source,))}, {})
    wait_for(lambda: tp in states(cluster, [tp]), 30, "the partition's state")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(500):
        producer.produce(tp.topic, value=b"%d" % i * 50, partition=0)
    assert producer.flush(30) == 0
    cluster.stop_broker(new)
    # as kafka-reassign-partitions --zookeeper writes it, to a broker that is down
    cluster.zk.zk.create(z.REASSIGN_PARTITIONS_PATH, z.encode_reassignment({tp: (source, new)}))
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((source, new), (new,), ()), 30,
             "the move started")  # fmt: skip
    cluster.kill(controller)
    cluster.wait_for_controller(other_than=controller)
    cluster.brokers[new].start()
    wait_for(lambda: _assignment(cluster, tp) == z.ReplicaAssignment((source, new)), 60,
             "the new controller completes the move")  # fmt: skip
    wait_for(lambda: cluster.zk.zk.exists(z.REASSIGN_PARTITIONS_PATH) is None, 30, "the request znode gone")
    assert sorted(states(cluster, [tp])[tp].isr) == sorted([source, new])
    wait_for(lambda: log_bytes(partition_dir(cluster, new, tp)) == log_bytes(partition_dir(cluster, source, tp)),
             30, "the new replica equal to the leader")  # fmt: skip
    assert len(log_bytes(partition_dir(cluster, new, tp))) > 20_000
