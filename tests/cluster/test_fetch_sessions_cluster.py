"""Follower fetch sessions (KIP-227) in a three-broker cluster (ZooKeeper and ``tidelog serve``
processes), measured on the leader's side from its /metrics: the partitions follower Fetch
requests named and were answered (tidelog_fetch_*{fetcher="follower"}).

Each broker leads 4 of 12 partitions (replication factor 3) and follows 8. Once the sessions
are open, idle rounds name and answer no partition; new records still reach every replica,
and the rounds are idle again once the followers caught up; a leader restarted loses its sessions, its
followers open new ones with a full Fetch and replication goes on; a leader without cache
slots (``max.incremental.fetch.session.cache.slots`` 0) answers every Fetch in full."""

from __future__ import annotations

from confluent_kafka import Producer
from replication_support import (
    create_topic,
    log_bytes,
    metric,
    partition_dir,
    states,
    wait_for,
)

from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "sessions"
PARTITIONS = 12
CONFIG = {"http.listeners": "http://127.0.0.1:0", "auto.leader.rebalance.enable": "false"}


def follower_counts(cluster: EmbeddedCluster, broker_id: int) -> tuple[int, int, int]:
    """(requests, partitions named, partitions answered) of followers' Fetch on a leader."""
    return tuple(  # type: ignore[return-value]
        int(metric(cluster, broker_id, f'tidelog_fetch_{name}_total{{fetcher="follower"}}'))
        for name in ("requests", "partitions_requested", "partitions_answered")
    )


def sessions(cluster: EmbeddedCluster, broker_id: int) -> float:
    return metric(cluster, broker_id, "kafka_server_fetchsessioncache_numincrementalfetchsessions")


def idle_rounds(cluster: EmbeddedCluster, broker_id: int, rounds: int = 6) -> tuple[int, int, int]:
    """Waits for ``rounds`` follower requests on the leader; the growth of each count (a
    request is counted when it arrives, its answer when it leaves: a long poll apart)."""
    before = follower_counts(cluster, broker_id)
    wait_for(lambda: follower_counts(cluster, broker_id)[0] >= before[0] + rounds, 30,
             f"{rounds} follower fetches on broker {broker_id}")  # fmt: skip
    after = follower_counts(cluster, broker_id)
    return after[0] - before[0], after[1] - before[1], after[2] - before[2]


def produce(cluster: EmbeddedCluster, partitions: list[int], n: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for part in partitions:
        for i in range(n):
            p.produce(TOPIC, value=f"{part}-{i}".encode(), partition=part)
    assert p.flush(60) == 0


def wait_replicated(cluster: EmbeddedCluster, tps: list[TopicPartition]) -> None:
    current = states(cluster, tps)
    for tp in tps:
        leader = partition_dir(cluster, current[tp].leader, tp)

        def same(tp: TopicPartition = tp, leader: object = leader) -> bool:
            data = log_bytes(leader)  # type: ignore[arg-type]
            return len(data) > 0 and all(
                log_bytes(partition_dir(cluster, b, tp)) == data for b in cluster.brokers
            )

        wait_for(same, 60, f"every replica of {tp} equal to the leader's")


def test_idle_sessions_carry_no_partitions_and_survive_a_leader_restart(
    zookeeper_server: ZooKeeperServer,
) -> None:
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG) as cluster:
        tps = create_topic(cluster, TOPIC, PARTITIONS)
        led_by_1 = [tp.partition for tp, s in states(cluster, tps).items() if s.leader == 1]
        assert len(led_by_1) == 4
        wait_for(lambda: sessions(cluster, 1) == 2, 30, "a session per follower on broker 1")
        idle_rounds(cluster, 1, 2)  # the full fetches that opened the sessions are answered
        requests, named, answered = idle_rounds(cluster, 1)
        assert requests >= 6 and (named, answered) == (0, 0)

        # new records on one partition: replicated, then idle rounds again
        produce(cluster, [led_by_1[0]], 50)
        wait_replicated(cluster, [TopicPartition(TOPIC, led_by_1[0])])
        wait_for(lambda: idle_rounds(cluster, 1)[1:] == (0, 0), 30, "idle again once caught up")

        # the leader restarts: its sessions are gone, the followers open new ones
        cluster.restart(1)
        produce(cluster, list(range(PARTITIONS)), 20)
        wait_replicated(cluster, tps)
        for leader in (2, 3):  # broker 1 now follows them: sessions again, idle again
            wait_for(lambda leader=leader: idle_rounds(cluster, leader)[1:] == (0, 0), 60,
                     f"idle follower fetches on broker {leader}")  # fmt: skip
        assert sessions(cluster, 1) == 0  # it leads nothing now


def test_a_leader_without_slots_answers_full_fetches(zookeeper_server: ZooKeeperServer) -> None:
    config = {**CONFIG, "max.incremental.fetch.session.cache.slots": "0"}
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=config) as cluster:
        tps = create_topic(cluster, TOPIC, PARTITIONS)
        # a follower adds the partitions of a new topic as its fetchers learn them: wait for
        # rounds in which both followers fetch all 4 partitions broker 1 leads
        wait_for(lambda: (r := idle_rounds(cluster, 1, 2))[1] == 4 * r[0], 30,
                 "both followers fetching every partition broker 1 leads")  # fmt: skip
        requests, named, answered = idle_rounds(cluster, 1)
        # every request names and answers the 4 partitions broker 1 leads for that follower
        assert named == 4 * requests and answered >= 4 * (requests - 2)
        assert sessions(cluster, 1) == 0
        produce(cluster, list(range(PARTITIONS)), 20)
        wait_replicated(cluster, tps)
