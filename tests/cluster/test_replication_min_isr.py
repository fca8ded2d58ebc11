"""min.insync.replicas with brokers killed: three broker processes, a topic with replication
factor 3 and min.insync.replicas=2. SIGKILL both followers: once their ZooKeeper sessions
expire the controller takes them out of the ISR, and the leader answers acks=all produce with
NOT_ENOUGH_REPLICAS, writing nothing (no record is acknowledged with a single copy). The two
brokers come back: they catch up, rejoin the ISR through AlterPartition, acks=all produce
succeeds again, and every record ever acknowledged is there, once, in order."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import (
    create_topic,
    log_bytes,
    partition_dir,
    states,
    wait_for,
)

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.testing import EmbeddedCluster

TOPIC = "min-isr"


def produce_all(cluster: EmbeddedCluster, leader: int, values: list[bytes]) -> int:
    """One acks=all Produce v9 of ``values`` to partition 0 on ``leader``; its error code."""
    conn = BrokerConnection("127.0.0.1", cluster.brokers[leader].port, client_id="t", timeout_s=30)
    try:
        # timestamped now: a timestamp of 0 is past retention.ms, and the broker's first
        # retention check (30 s after its start) would delete the records
        now = int(time.time() * 1000)
        batch = build_batch([(now, None, v) for v in values])
        resp = conn.call(0, 9, {
            "acks": -1, "timeout": 20_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        })  # fmt: skip
    finally:
        conn.close()
    return int(resp.responses[0].partition_responses[0].error_code)


def read_all(cluster: EmbeddedCluster) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([KafkaTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    out: list[bytes] = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end of partition"
        if msg.error() is not None:
            assert msg.error().code() == msg.error()._PARTITION_EOF, msg.error()
            break
        out.append(msg.value())
    consumer.close()
    return out


def test_two_of_three_brokers_killed(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    tps = create_topic(cluster, TOPIC, 1, config={"min.insync.replicas": "2"})
    leader = states(cluster, tps)[tps[0]].leader
    followers = [b for b in cluster.brokers if b != leader]
    acked: list[bytes] = []
    first = [f"before-{i}".encode() for i in range(50)]
    assert produce_all(cluster, leader, first) == ErrorCode.NONE
    acked += first

    for b in followers:
        cluster.kill(b)
    # the controller sees the sessions expire and shrinks the ISR to the leader
    wait_for(
        lambda: tuple(states(cluster, tps)[tps[0]].isr) == (leader,), 40, "ISR shrunk to leader"
    )
    refused = [f"refused-{i}".encode() for i in range(10)]
    assert produce_all(cluster, leader, refused) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_all(cluster, leader, refused) == ErrorCode.NOT_ENOUGH_REPLICAS

    for b in followers:
        cluster.restart(b)
    wait_for(lambda: sorted(states(cluster, tps)[tps[0]].isr) == [1, 2, 3], 60, "ISR complete")
    after = [f"after-{i}".encode() for i in range(50)]
    assert produce_all(cluster, leader, after) == ErrorCode.NONE
    acked += after

    assert read_all(cluster) == acked  # nothing refused written, nothing acked lost, in order
    leader_dir = partition_dir(cluster, leader, tps[0])
    wait_for(
        lambda: all(log_bytes(partition_dir(cluster, b, tps[0])) == log_bytes(leader_dir)
                    for b in followers),
        30, "followers byte-identical",
    )  # fmt: skip
