"""Kafka's replication gauges on three broker processes, read from each broker's /metrics:
with a follower SIGKILLed (the controller takes it out of every ISR once its ZooKeeper session
expired), UnderReplicatedPartitions, UnderMinIsrPartitionCount and AtMinIsrPartitionCount
count the partitions their leaders hold, and IsrShrinksPerSec counted the shrinks; with the
follower back and caught up they read 0 again and IsrExpandsPerSec counted the expansions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_support import create_topic, metric, states, wait_for

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
    config = {"http.listeners": "http://127.0.0.1:0", "replica.fetch.backoff.ms": "200"}
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=config) as c:
        yield c


def total(cluster: EmbeddedCluster, series: str, brokers: list[int]) -> float:
    return sum(metric(cluster, b, series) for b in brokers)


def test_gauges_count_a_dead_follower_and_return_to_zero(cluster: EmbeddedCluster) -> None:
    controller = cluster.wait_for_controller()
    victim = next(b for b in sorted(cluster.brokers) if b != controller)
    live = [b for b in sorted(cluster.brokers) if b != victim]
    # one partition whose ISR of 2 is at min.insync.replicas=2, one whose is under 3; the
    # victim placed last: a follower of both
    at = create_topic(cluster, "at-min", 1, config={"min.insync.replicas": "2"}, last=victim)
    under = create_topic(cluster, "under-min", 1, config={"min.insync.replicas": "3"}, last=victim)
    tps: list[TopicPartition] = at + under
    assert all(s.leader != victim for s in states(cluster, tps).values())
    every = sorted(cluster.brokers)
    for series in (UNDER_REPLICATED, UNDER_MIN_ISR, AT_MIN_ISR):
        assert total(cluster, series, every) == 0, series
    shrinks, expands = total(cluster, SHRINKS, live), total(cluster, EXPANDS, live)

    cluster.kill(victim)
    wait_for(lambda: all(victim not in s.isr for s in states(cluster, tps).values()),
             DEADLINE_S, "the dead follower out of both ISRs")  # fmt: skip
    wait_for(lambda: total(cluster, UNDER_REPLICATED, live) == 2, DEADLINE_S,
             "UnderReplicatedPartitions 2")  # fmt: skip
    assert total(cluster, UNDER_MIN_ISR, live) == 1
    assert total(cluster, AT_MIN_ISR, live) == 1
    assert total(cluster, SHRINKS, live) >= shrinks + 2

    cluster.start_broker(victim)
    wait_for(lambda: all(len(s.isr) == 3 for s in states(cluster, tps).values()), DEADLINE_S,
             "the follower back in both ISRs")  # fmt: skip
    wait_for(lambda: total(cluster, UNDER_REPLICATED, every) == 0, DEADLINE_S,
             "UnderReplicatedPartitions back to 0")  # fmt: skip
    assert total(cluster, UNDER_MIN_ISR, every) == 0
    assert total(cluster, AT_MIN_ISR, every) == 0
    assert total(cluster, EXPANDS, live) >= expands + 2
