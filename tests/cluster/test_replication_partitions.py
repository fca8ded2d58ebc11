"""Jepsen-style fault runs with network partitions: each broker in its own network namespace
(tidelog.testing.netns), and the nemesis of jepsen_support.py extended with cuts made of
blackhole routes: a leader, a follower or the controller cut from the other brokers, cut from
ZooKeeper, or alone on the minority side of a 1/2 split; mixed with the kills and pauses.
The checker is the same: no acknowledged record lost, duplicated or moved, producers' order
kept, nothing read later gone, every replica byte-identical to its leader.

A full log dir is a nemesis operation too: each broker has two small tmpfs log dirs, the
nemesis fills the one holding a partition's leader or follower to the last byte, and the
broker's next write there meets ENOSPC, as on a full disk. The broker stays up on its other
dir; the full one goes offline and the controller moves its replicas' leadership and ISR
membership to the other brokers (log dir event notification). After the hold the filler is
deleted and the broker restarted (an offline dir comes back only with a restart, as in Kafka).

The seed is printed (and taken from ``TIDELOG_FAULT_SEED`` when set); with
``TIDELOG_FAULT_LOG_DIR`` set, each broker's output is written there too."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jepsen_support import History, Nemesis, Workload, check, final_log, wait_healthy
from replication_support import create_topic, log_bytes, partition_dir, states, wait_for

from tidelog.testing.capability import require_netns
from tidelog.testing.netns import LOG_DIR_NAMES, NetnsCluster
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


class LogDirNemesis(PartitionNemesis):
    """Fills the log dir holding a partition's leader (or a follower) on one broker, checks
    the broker stays up while that replica leaves leadership and the ISR, then frees the dir
    and restarts the broker. ``moved`` records each check."""

    def __init__(self, cluster: NetnsCluster, tps: list[TopicPartition], seed: int) -> None:
        super().__init__(cluster, tps, seed)
        self.hold_s = 4.0
        self.moved: list[str] = []

    def run_one(self, history: History) -> None:
        tp = self.rng.choice(self.tps)
        state = states(self.net, [tp])[tp]
        kind = self.rng.choice(("fill-logdir-leader", "fill-logdir-follower"))
        followers = [b for b in state.isr if b != state.leader]
        victim = state.leader if kind.endswith("leader") or not followers else followers[0]
        name = next(n for n in LOG_DIR_NAMES
                    if (self.net.log_dir(victim, n) / f"{tp.topic}-{tp.partition}").exists())
        history.faults.append(f"{kind} {victim} {name} ({tp})")
        self.net.fill_log_dir(victim, name)
        try:
            wait_for(lambda: victim not in states(self.net, [tp])[tp].isr
                     and states(self.net, [tp])[tp].leader not in (victim, -1),
                     60, f"{tp} led and in sync without broker {victim}")  # fmt: skip
            self.moved.append(f"{tp} off broker {victim}")
            assert self.net.brokers[victim].running, f"broker {victim} stopped"
            time.sleep(self.hold_s)  # writes go on without the full dir a while
        finally:
            self.net.free_log_dirs(victim)
            broker = self.net.brokers[victim]
            broker.stop()
            broker.start()
        time.sleep(self.rng.uniform(1.0, 3.0))


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


def dump_broker_output(cluster: NetnsCluster, seed: int) -> None:
    """Each broker's output since its last start, into ``TIDELOG_FAULT_LOG_DIR`` when set."""
    where = os.environ.get("TIDELOG_FAULT_LOG_DIR")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    for broker_id, broker in cluster.brokers.items():
        with open(os.path.join(where, f"seed-{seed}-broker-{broker_id}.log"), "w") as f:
            f.writelines(broker.output)


def replica_dir(cluster: NetnsCluster, broker_id: int, tp: TopicPartition) -> Path:
    """The partition's directory on that broker, in whichever of its log dirs holds it."""
    if cluster.log_dir_bytes is None:
        return partition_dir(cluster, broker_id, tp)
    found = [cluster.log_dir(broker_id, n) / f"{tp.topic}-{tp.partition}" for n in LOG_DIR_NAMES]
    return next((d for d in found if d.exists()), found[0])


def run(cluster: NetnsCluster, faults: int, nemesis_class: type[PartitionNemesis] = PartitionNemesis,
        ) -> PartitionNemesis:  # fmt: skip
    seed = int(os.environ.get("TIDELOG_FAULT_SEED", random.randrange(1 << 32)))
    print(f"partition run seed {seed} ({faults} faults)")
    try:
        return _run(cluster, faults, seed, nemesis_class)
    finally:
        dump_broker_output(cluster, seed)


def _run(cluster: NetnsCluster, faults: int, seed: int,
         nemesis_class: type[PartitionNemesis]) -> PartitionNemesis:  # fmt: skip
    tps = create_topic(cluster, TOPIC, PARTITIONS, config={"min.insync.replicas": "2"})
    workload = Workload(cluster, TOPIC, PARTITIONS)
    nemesis = nemesis_class(cluster, tps, seed)
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
        leader_dir = replica_dir(cluster, state.leader, tp)
        wait_for(
            lambda tp=tp, state=state, leader_dir=leader_dir: all(
                log_bytes(replica_dir(cluster, b, tp)) == log_bytes(leader_dir)
                for b in state.isr),
            60, f"replicas of {tp} byte-identical (seed {seed})",
        )  # fmt: skip
    return nemesis


@pytest.mark.timeout(300)
def test_short_partition_run(cluster: NetnsCluster) -> None:
    run(cluster, faults=4)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_long_partition_run(cluster: NetnsCluster) -> None:
    run(cluster, faults=20)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_full_log_dir_run(zookeeper_server: ZooKeeperServer) -> None:
    """Two full log dirs, one after the other, under the same workload and checker: the
    broker stays up, the full dir's replicas leave leadership and the ISR, nothing
    acknowledged is lost. No free-space floor (``log.dir.min.free.bytes`` 0): the append
    that meets ENOSPC takes the dir offline, as in Kafka."""
    require_netns()
    config = {**CONFIG, "log.dir.min.free.bytes": "0"}
    with NetnsCluster(brokers=3, zookeeper=zookeeper_server, config=config,
                      log_dir_bytes=64 << 20) as cluster:  # fmt: skip
        nemesis = run(cluster, faults=2, nemesis_class=LogDirNemesis)
    assert isinstance(nemesis, LogDirNemesis) and len(nemesis.moved) == 2, nemesis.moved


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
