"""Brokers as separate processes: SIGKILL of the controller's broker, SIGTERM of a leader."""

from __future__ import annotations

import signal
import time
import uuid

from tidelog.server.metadata import zk_data as z
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

SESSION_TIMEOUT_S = 6.0


def test_sigkill_of_the_controller_elects_a_new_one_within_session_timeout(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    assert sorted(cluster.zk.get_all_brokers()) == [1, 2, 3]
    first = cluster.wait_for_controller()
    epoch = cluster.zk.get_controller_epoch()
    assert epoch is not None
    killed = time.monotonic()
    cluster.kill(first)
    new = cluster.wait_for_controller(timeout=SESSION_TIMEOUT_S + 2, other_than=first)
    took = time.monotonic() - killed
    assert new != first and took < SESSION_TIMEOUT_S + 2, took
    assert cluster.zk.get_controller_epoch()[0] == epoch[0] + 1  # type: ignore[index]
    assert first not in cluster.zk.get_all_brokers()


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
    while time.monotonic() - killed < SESSION_TIMEOUT_S + 2:
        states = cluster.zk.get_topic_partition_states(tps)
        if all(s.leader not in (victim, -1) for s in states.values()):
            break
        time.sleep(0.05)
    states = cluster.zk.get_topic_partition_states(tps)
    for tp, s in states.items():
        assert s.leader == order[1] and s.leader in before[tp].isr  # the next ISR member
        assert s.leader_epoch == before[tp].leader_epoch + 1 and victim not in s.isr
