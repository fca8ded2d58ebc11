"""Controller failover with acks=all traffic: three broker processes, Kafka's default
``replica.lag.time.max.ms`` (30000), 6 s ZooKeeper sessions, a topic with replication factor 3
and ``min.insync.replicas=2``, an idempotent acks=all producer on every partition.

SIGKILL the controller (a) while it only follows the topic's partitions, (b) while it also
leads one. The new controller must take every replica on a broker that is not alive offline
at failover (Kafka's ZkReplicaStateMachine.startup: OfflineReplica, out of the ISR) and elect
leaders for the partitions the dead broker led from their ISR filtered by live brokers. So
acks=all writes on every partition are acknowledged again within the session timeout plus a
few seconds of the kill, not after the surviving leaders' own 30 s lag check; and every
acknowledged record is read back, once, in order.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import all_have_full_isr, states, wait_for

from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "failover"
SESSION_TIMEOUT_S = 6.0
RESUME_DEADLINE_S = SESSION_TIMEOUT_S + 3.0  # the bound, measured from the kill
GIVE_UP_S = 45.0  # how long to wait before calling a partition stalled (longer than the lag check)


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    config = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "30000"}
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=config) as c:
        yield c


def create_topic(cluster: EmbeddedCluster, replicas: list[tuple[int, ...]]) -> list[TopicPartition]:
    """Partition p on ``replicas[p]`` (its first replica leads), min.insync.replicas=2."""
    assignment = {p: z.ReplicaAssignment(r) for p, r in enumerate(replicas)}
    cluster.zk.create_topic(TOPIC, uuid.uuid4(), assignment, {"min.insync.replicas": "2"})
    tps = [TopicPartition(TOPIC, p) for p in range(len(replicas))]
    wait_for(lambda: all_have_full_isr(cluster, tps, 3), 30, "full ISRs")
    found = states(cluster, tps)
    assert [found[tp].leader for tp in tps] == [r[0] for r in replicas]
    return tps


@dataclass
class AckedWrites:
    """An acks=all producer writing to every partition until stopped; per partition, what
    was sent when and which values were acknowledged when."""

    cluster: EmbeddedCluster
    partitions: int
    sent_at: dict[bytes, float] = field(default_factory=dict)
    acked: dict[int, list[tuple[bytes, float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(60)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.setdefault(msg.partition(), []).append((msg.value(), time.monotonic()))

    def _run(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.cluster.bootstrap_servers, "acks": "all",
            "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 90_000,
            "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        seq = 0
        while not self._stop.is_set():
            for p in range(self.partitions):
                value = f"{p}-{seq}".encode()
                self.sent_at[value] = time.monotonic()
                producer.produce(TOPIC, value, partition=p, on_delivery=self._on_delivery)
            seq += 1
            producer.poll(0.02)
        assert producer.flush(60) == 0, "records left unacknowledged"

    def resumed_after(self, t: float) -> dict[int, float]:
        """Per partition, seconds from ``t`` to the first acknowledgement of a record sent
        after ``t`` (a partition missing has none yet)."""
        out = {}
        for p, acks in list(self.acked.items()):
            times = [at for v, at in list(acks) if self.sent_at[v] > t]
            if times:
                out[p] = min(times) - t
        return out


def read_back(cluster: EmbeddedCluster, partitions: int) -> dict[int, list[bytes]]:
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
        "enable.auto.commit": False, "enable.partition.eof": True,
    })  # fmt: skip
    consumer.assign([KafkaTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    while len(at_end) < partitions:
        msg = consumer.poll(15)
        assert msg is not None, f"no end of partitions {set(out) - at_end}"
        if msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            at_end.add(msg.partition())
        else:
            out[msg.partition()].append(msg.value())
    consumer.close()
    return out


def check_acked_kept(writes: AckedWrites, found: dict[int, list[bytes]]) -> None:
    """Every acknowledged value is there once, in the order acknowledged."""
    for p, acks in writes.acked.items():
        values = found[p]
        assert len(values) == len(set(values)), f"partition {p} has duplicates"
        position = {v: i for i, v in enumerate(values)}
        lost = [v for v, _ in acks if v not in position]
        assert not lost, f"partition {p} lost {len(lost)} acknowledged records: {lost[:5]}"
        order = [position[v] for v, _ in acks]
        assert order == sorted(order), f"partition {p}: acknowledged records out of order"


def kill_and_measure(
    cluster: EmbeddedCluster, tps: list[TopicPartition], victim: int
) -> tuple[dict[int, float], AckedWrites, float]:
    """Writes flowing on every partition, SIGKILL ``victim``; the resume times."""
    writes = AckedWrites(cluster, len(tps))
    writes.start()
    wait_for(lambda: len(writes.resumed_after(time.monotonic() - 1)) == len(tps), 30, "acks")
    killed_at = time.monotonic()
    cluster.kill(victim)
    try:
        wait_for(lambda: len(writes.resumed_after(killed_at)) == len(tps), GIVE_UP_S, "acks resumed")
    except AssertionError:
        pass  # reported below with what did resume
    resumed = writes.resumed_after(killed_at)
    writes.stop()
    print(f"SIGKILL of broker {victim}: acks resumed after {resumed} s")
    return resumed, writes, killed_at


def check_failover(
    cluster: EmbeddedCluster,
    tps: list[TopicPartition],
    victim: int,
    before: dict[TopicPartition, z.LeaderIsrAndControllerEpoch],
    old_epoch: int,
) -> None:
    """What the new controller decided, in ZooKeeper and in its log."""
    new_controller = cluster.wait_for_controller(other_than=victim)
    epoch = cluster.zk.get_controller_epoch()
    assert epoch is not None and epoch[0] > old_epoch
    after = states(cluster, tps)
    live = sorted(b for b in cluster.brokers if b != victim)
    for tp in tps:
        s, old = after[tp], before[tp]
        assert victim not in s.isr and sorted(s.isr) == live, (tp, s)
        assert s.leader_epoch > old.leader_epoch, (tp, old, s)  # the new ISR at a new epoch
        assert s.controller_epoch == epoch[0]
        if old.leader == victim:
            assert s.leader in live, (tp, s)
        else:
            assert s.leader == old.leader, (tp, s)
    out = "".join(cluster.brokers[new_controller].output)
    assert f"brokers [{victim}] are not alive" in out, out[-3000:]
    if any(before[tp].leader == victim for tp in tps):
        assert "elected leaders at failover" in out, out[-3000:]


def run_case(cluster: EmbeddedCluster, replicas: list[tuple[int, ...]], victim: int) -> None:
    tps = create_topic(cluster, replicas)
    before = states(cluster, tps)
    old_epoch = cluster.zk.get_controller_epoch()
    assert old_epoch is not None
    resumed, writes, _ = kill_and_measure(cluster, tps, victim)
    assert sorted(resumed) == list(range(len(tps))), f"partitions never resumed: {resumed}"
    slow = {p: t for p, t in resumed.items() if t > RESUME_DEADLINE_S}
    assert not slow, f"acks=all resumed later than {RESUME_DEADLINE_S} s after the kill: {slow}"
    check_failover(cluster, tps, victim, before, old_epoch[0])
    check_acked_kept(writes, read_back(cluster, len(tps)))


def test_kill_controller_that_only_follows(cluster: EmbeddedCluster) -> None:
    controller = cluster.wait_for_controller()
    a, b = sorted(x for x in cluster.brokers if x != controller)
    # the other two brokers lead; the controller follows every partition
    run_case(cluster, [(a, b, controller), (b, controller, a), (a, controller, b)], controller)


def test_kill_controller_that_also_leads(cluster: EmbeddedCluster) -> None:
    controller = cluster.wait_for_controller()
    a, b = sorted(x for x in cluster.brokers if x != controller)
    # one partition led by each broker: the controller leads one and follows two
    run_case(cluster, [(controller, a, b), (a, b, controller), (b, controller, a)], controller)
