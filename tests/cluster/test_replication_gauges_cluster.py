"""Kafka's replication gauges on three broker processes, read from each broker's /metrics:
with followers SIGKILLed (the leader takes each out of the ISR once it lags
``replica.lag.time.max.ms``), UnderReplicatedPartitions, AtMinIsrPartitionCount and UnderMinIsrPartitionCount
count the partition on its leader, and IsrShrinksPerSec counted the shrinks; with the
followers back and caught up they read 0 again and IsrExpandsPerSec counted the expansions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from replication_support import metric, states, wait_for

from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

PREFIX = "kafka_server_replicamanager_"
UNDER_REPLICATED = PREFIX + "underreplicatedpartitions"
UNDER_MIN_ISR = PREFIX + "underminisrpartitioncount"
AT_MIN_ISR = PREFIX + "atminisrpartitioncount"
SHRINKS = PREFIX + "isrshrinks_total"
EXPANDS = PREFIX + "isrexpands_total"
DEADLINE_S = 60  # generous: the session timeout (6 s) and a catch-up on a loaded machine


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    # IsrShrinksPerSec counts the leader's own ISR changes (AlterPartition, as Kafka's
    # Partition marks them), not the controller's: a lag bound under the session timeout
    # lets the leader shrink the ISR first
    config = {"http.listeners": "http://127.0.0.1:0", "replica.fetch.backoff.ms": "200",
              "replica.lag.time.max.ms": "2000"}  # fmt: skip
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=config) as c:
        yield c


def total(cluster: EmbeddedCluster, series: str, brokers: list[int]) -> float:
    return sum(metric(cluster, b, series) for b in brokers)


def test_gauges_count_dead_followers_and_return_to_zero(cluster: EmbeddedCluster) -> None:
    """One partition (replication factor 3, min.insync.replicas 2) led by the controller's
    broker: one follower SIGKILLed puts it at its min ISR, the second under it; both back,
    every gauge reads 0 again."""
    leader = cluster.wait_for_controller()
    first, second = [b for b in sorted(cluster.brokers) if b != leader]
    tp = TopicPartition("gauges", 0)
    cluster.zk.create_topic(tp.topic, uuid.uuid4(), {0: z.ReplicaAssignment((leader, first, second))},
                            {"min.insync.replicas": "2"})  # fmt: skip
    wait_for(lambda: isr(cluster, tp) == {leader, first, second}, DEADLINE_S, "a full ISR")
    every = sorted(cluster.brokers)
    assert gauges(cluster, every) == (0, 0, 0)
    shrinks, expands = metric(cluster, leader, SHRINKS), metric(cluster, leader, EXPANDS)

    cluster.kill(first)  # behind the leader's log end, the leader shrinks the ISR once it lags
    write(cluster, tp)
    wait_for(lambda: isr(cluster, tp) == {leader, second}, DEADLINE_S, "ISR without one")
    wait_for(lambda: gauges(cluster, [leader]) == (1, 0, 1), DEADLINE_S,
             "under-replicated and at its min ISR")  # fmt: skip
    cluster.kill(second)
    write(cluster, tp)
    wait_for(lambda: isr(cluster, tp) == {leader}, DEADLINE_S, "ISR of the leader alone")
    wait_for(lambda: gauges(cluster, [leader]) == (1, 1, 0), DEADLINE_S,
             "under-replicated and under its min ISR")  # fmt: skip
    assert metric(cluster, leader, SHRINKS) >= shrinks + 2

    cluster.start_broker(first)
    cluster.start_broker(second)
    wait_for(lambda: isr(cluster, tp) == {leader, first, second}, DEADLINE_S,
             "both followers back in the ISR")  # fmt: skip
    wait_for(lambda: gauges(cluster, every) == (0, 0, 0), DEADLINE_S, "every gauge 0 again")
    assert metric(cluster, leader, EXPANDS) >= expands + 2


def write(cluster: EmbeddedCluster, tp: TopicPartition) -> None:
    """A few records (acks=1) the dead follower will lack: a follower at the leader's log
    end is in sync however long it is silent (Kafka's rule), one behind is not."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
    for i in range(10):
        producer.produce(tp.topic, f"v{i}".encode(), partition=tp.partition)
    assert producer.flush(DEADLINE_S) == 0


def isr(cluster: EmbeddedCluster, tp: TopicPartition) -> set[int]:
    found = states(cluster, [tp]).get(tp)
    return set(found.isr) if found is not None else set()


def gauges(cluster: EmbeddedCluster, brokers: list[int]) -> tuple[float, float, float]:
    """UnderReplicatedPartitions, UnderMinIsrPartitionCount, AtMinIsrPartitionCount summed
    over ``brokers``."""
    return (total(cluster, UNDER_REPLICATED, brokers), total(cluster, UNDER_MIN_ISR, brokers),
            total(cluster, AT_MIN_ISR, brokers))  # fmt: skip
