"""Jepsen-style fault runs with network partitions: each broker in its own network namespace
(tidelog.testing.netns), and the nemesis of jepsen_support.py extended with cuts made of
blackhole routes: a leader, a follower or the controller cut from the other brokers, cut from
ZooKeeper, or alone on the minority side of a 1/2 split; mixed with the kills and pauses.
The checker is the same: no acknowledged record lost, duplicated or moved, producers' order
kept, nothing read later gone, every replica byte-identical to its leader.

The seed is printed (and taken from ``TIDELOG_FAULT_SEED`` when set)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from jepsen_support import History, Nemesis, Workload, check, final_log, wait_healthy
from replication_support import create_topic, log_bytes, partition_dir, states, wait_for

from tidelog.testing.capability import require_netns
from tidelog.testing.netns import NetnsCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "jepsen"
PARTITIONS = 3
PARTITION_FAULTS = (
    "cut-brokers-leader", "cut-brokers-follower", "cut-zk-leader", "cut-zk-controller",
    "isolate-leader", "isolate-follower", "isolate-controller",
)  # fmt: skip
CONFIG = {"unclean.leader.election.enable": "false", "replica.fetch.backoff.ms": "200",
          "replica.lag.time.max.ms": "10000"}  # fmt: skip


class PartitionNemesis(Nemesis):
    """Partitions (held ``cut_s``, past the ZooKeeper session timeout) and, with probability
    ``other``, one of the kills and pauses of :class:`Nemesis`."""

    def __init__(self, cluster: NetnsCluster, tps: list[TopicPartition], seed: int,
                 cut_s: float = 9.0, other: float = 0.25) -> None:  # fmt: skip
        super().__init__(cluster, tps, seed, pause_s=cut_s)
        self.net = cluster
        self.cut_s = cut_s
        self.other = other

    def run_one(self, history: History) -> None:
        if self.rng.random() < self.other:
            super().run_one(history)
            return
        kind = self.rng.choice(PARTITION_FAULTS)
        victim = self._pick(kind)
        history.faults.append(f"{kind} {victim}")
        if kind.startswith("cut-brokers"):
            self.net.cut_from_brokers(victim)
        elif kind.startswith("cut-zk"):
            self.net.cut_from_zookeeper(victim)
        else:
            self.net.isolate(victim)
        time.sleep(self.cut_s)  # the partition lasts a while (a nemesis schedule)
        self.net.heal()
        time.sleep(self.rng.uniform(1.0, 3.0))  # quiet time before the next fault

    def heal(self) -> None:
        self.net.heal()
        super().heal()


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[NetnsCluster]:
    require_netns()
    with NetnsCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG) as c:
        yield c


def can_connect(cluster: NetnsCluster, from_broker: int, host: str, port: int) -> bool:
    code = (f"import socket; socket.create_connection(({host!r}, {port}), timeout=1.5)")
    done = subprocess.run([*cluster.broker_command_prefix(from_broker), sys.executable, "-c", code],
                          capture_output=True, timeout=30, check=False)  # fmt: skip
    return done.returncode == 0


def registered(cluster: NetnsCluster) -> list[int]:
    return sorted(cluster.zk.get_all_brokers())


def test_cuts_block_traffic_and_heal_restores_it(cluster: NetnsCluster) -> None:
    port2 = cluster.brokers[2].port
    assert can_connect(cluster, 1, cluster.broker_host(2), port2)
    cluster.cut_between(1, 2)
    assert not can_connect(cluster, 1, cluster.broker_host(2), port2)
    assert not can_connect(cluster, 2, cluster.broker_host(1), cluster.brokers[1].port)
    assert can_connect(cluster, 3, cluster.broker_host(2), port2)
    cluster.cut_from_zookeeper(3)  # its session expires: its registration goes
    wait_for(lambda: registered(cluster) == [1, 2], 30, "broker 3 deregistered")
    cluster.heal()
    assert can_connect(cluster, 1, cluster.broker_host(2), port2)
    wait_for(lambda: registered(cluster) == [1, 2, 3], 30, "broker 3 registered again")


def run(cluster: NetnsCluster, faults: int) -> None:
    seed = int(os.environ.get("TIDELOG_FAULT_SEED", random.randrange(1 << 32)))
    print(f"partition run seed {seed} ({faults} faults)")
    tps = create_topic(cluster, TOPIC, PARTITIONS, config={"min.insync.replicas": "2"})
    workload = Workload(cluster, TOPIC, PARTITIONS)
    nemesis = PartitionNemesis(cluster, tps, seed)
    workload.start()
    try:
        time.sleep(2)  # some writes before the first fault
        for _ in range(faults):
            nemesis.run_one(workload.history)
    finally:
        nemesis.heal()
    wait_healthy(cluster, tps)
    time.sleep(2)  # writes on the healed cluster
    workload.stop()
    wait_healthy(cluster, tps)
    final = final_log(cluster, TOPIC, PARTITIONS)
    verdict = check(workload.history, final)
    h = workload.history
    print(f"seed {seed}: faults {h.faults}")
    print(f"seed {seed}: {verdict.acked} acked, {len(h.failed)} failed sends "
          f"({verdict.indeterminate_written} of them written), {len(h.seen)} reads")  # fmt: skip
    assert verdict.ok, (seed, verdict)
    assert verdict.acked > 100, (seed, verdict.acked)
    for tp, state in states(cluster, tps).items():
        leader_dir = partition_dir(cluster, state.leader, tp)
        wait_for(
            lambda tp=tp, state=state, leader_dir=leader_dir: all(
                log_bytes(partition_dir(cluster, b, tp)) == log_bytes(leader_dir)
                for b in state.isr),
            60, f"replicas of {tp} byte-identical (seed {seed})",
        )  # fmt: skip


@pytest.mark.quarantine(
    reason="seed 621294570 on a clean clone: after healing, a partition never got back a full "
    "ISR within 120 s, and two idempotent librdkafka producers failed fatally with 'Unable to "
    "reconstruct MessageSet' (an answer their sequence state cannot explain) -- passed 6 of 6 "
    "runs before; replay with TIDELOG_FAULT_SEED=621294570 -m quarantine")
@pytest.mark.timeout(300)
def test_short_partition_run(cluster: NetnsCluster) -> None:
    run(cluster, faults=4)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_long_partition_run(cluster: NetnsCluster) -> None:
    run(cluster, faults=20)


def test_a_failed_start_leaves_no_namespace_or_link(zookeeper_server: ZooKeeperServer) -> None:
    require_netns()
    cluster = NetnsCluster(brokers=2, zookeeper=zookeeper_server,
                           config={"zookeeper.session.timeout.ms": "not-a-number"})  # fmt: skip
    try:
        with pytest.raises(RuntimeError, match="did not start"):
            cluster.start()
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                    check=True, timeout=30).stdout  # fmt: skip
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True,
                               timeout=30).stdout  # fmt: skip
    finally:
        cluster.stop()  # harmless after the failed start's own cleanup; a leak guard otherwise
    assert cluster.namespace(1) not in namespaces and cluster.namespace(2) not in namespaces
    assert cluster.bridge not in links and cluster.veth(1) not in links
