"""Replication in a three-broker cluster (ZooKeeper and `tidelog serve` processes): acks=all
producers on a topic with replication factor 3; every follower's segment files are the
leader's, byte for byte, up to the high watermark; consumers read everything acked."""

from __future__ import annotations

import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import (
    create_topic,
    log_bytes,
    partition_dir,
    states,
    wait_for,
)

from tidelog.testing import EmbeddedCluster


def test_followers_are_byte_identical_to_the_leader(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    tps = create_topic(cluster, "replicated", 3, config={"min.insync.replicas": "2"})
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
        "enable.idempotence": True, "compression.type": "lz4", "linger.ms": 2,
    })  # fmt: skip
    acked: list[bytes] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value())  # type: ignore[attr-defined]

    sent = [f"{uuid.uuid4().hex}-{i}".encode() for i in range(3000)]
    for i, v in enumerate(sent):
        producer.produce("replicated", value=v, key=str(i % 11).encode(), on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    assert sorted(acked) == sorted(sent)

    # every replica reaches the leader's log end, and the bytes below the HW are the same
    current = states(cluster, tps)
    for tp, state in current.items():
        leader_dir = partition_dir(cluster, state.leader, tp)

        def caught_up(tp=tp, state=state, leader_dir=leader_dir) -> bool:
            leader = log_bytes(leader_dir)
            return all(log_bytes(partition_dir(cluster, b, tp)) == leader for b in state.isr)

        wait_for(caught_up, 30, f"replicas of {tp} equal to the leader's")
        assert len(log_bytes(leader_dir)) > 1000
        assert sorted(state.isr) == [1, 2, 3]

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    # assigned, not subscribed: reading needs no group coordinator
    consumer.assign(
        [KafkaTopicPartition("replicated", tp.partition, OFFSET_BEGINNING) for tp in tps]
    )
    seen: list[bytes] = []
    wait_for(lambda: _poll_into(consumer, seen) >= len(sent), 60, "all acked records consumed")
    consumer.close()
    assert sorted(seen) == sorted(sent)


def _poll_into(consumer: Consumer, seen: list[bytes]) -> int:
    for msg in consumer.consume(500, 0.5):
        if msg.error() is None:
            seen.append(msg.value())
    return len(seen)
