"""confluent-kafka (librdkafka) consumers with ``group.protocol=consumer`` against the broker:
the KIP-848 protocol end to end, with real sockets, a real killed process and a real restart.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_group_members import Member, first_offset, wait_for
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedBroker

SESSION_MS = 3000
CONFIG = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    # librdkafka times a ConsumerGroupHeartbeat out after one heartbeat interval and retries
    # the same (not full) request; when the lost answer carried a new assignment, the broker
    # (as Kafka's) sends none again, and the member keeps its old partitions. A 250 ms
    # interval made that happen on a loaded machine; 1 s leaves room for the machine's stalls.
    "group.consumer.heartbeat.interval.ms": 1000,
    "offsets.topic.num.partitions": 3,
}
WORKER = Path(__file__).with_name("consumer_group_worker.py")


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


def create(broker: EmbeddedBroker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def sizes(members: list[Member]) -> list[int]:
    return sorted(len(m.partitions()) for m in members)


def disjoint_cover(members: list[Member], n: int) -> bool:
    got = [p for m in members for p in m.partitions()]
    return sorted(got) == list(range(n))


def test_three_members_get_two_partitions_each_and_a_fourth_moves_only_what_it_needs(
        broker: EmbeddedBroker) -> None:
    create(broker, "six", 6)
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})

    def produce() -> None:
        while not stop.is_set():
            for p in range(6):
                producer.produce("six", b"x", partition=p)
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(10)

    feeder = threading.Thread(target=produce, daemon=True)
    feeder.start()
    members = [Member(broker, "g-four", ["six"]) for _ in range(3)]
    try:
        wait_for(lambda: sizes(members) == [2, 2, 2] and disjoint_cover(members, 6),
                 what="2/2/2")
        before = [m.partitions() for m in members]
        joined = time.monotonic()
        fourth = Member(broker, "g-four", ["six"])
        everyone = [*members, fourth]
        took = wait_for(lambda: sizes(everyone) == [1, 1, 2, 2]
                        and disjoint_cover(everyone, 6), what="the fourth member's share")
        settled = time.monotonic()
        print(f"fourth member reconciled in {took * 1000:.0f} ms")
        moved = 0
        for m, had in zip(members, before, strict=True):
            kept = m.partitions()
            assert kept <= had
            moved += len(had - kept)
            revoked = set().union(*(r for t, r in m.revoked if t >= joined), set())
            assert not (revoked & kept), "a member lost a partition it keeps"
            # it goes on consuming what it keeps (measured: the longest gap between two of
            # its records around the rebalance, printed)
            wait_for(lambda m=m, kept=kept: any(t > settled and p in kept
                                               for p, t in list(m.received)),
                     what="records after the rebalance")
            times = [t for p, t in list(m.received) if p in kept and joined - 1 <= t]
            gap = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
            print(f"member kept {sorted(kept)}: longest gap between its records around the "
                  f"rebalance {gap * 1000:.0f} ms")
        assert moved == 1
    finally:
        stop.set()
        feeder.join(10)
        for m in members:
            m.close()
        if "fourth" in locals():
            fourth.close()


def _spawn(broker: EmbeddedBroker, group: str, topic: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), broker.bootstrap_servers, group,
                             topic], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _read_until(proc: subprocess.Popen[str], want: Callable[[list[int]], bool],
                timeout: float = 30.0) -> list[int]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        got = json.loads(line)["assigned"]
        if want(got):
            return list(got)
    raise AssertionError("the worker never reported the expected assignment")


def test_a_killed_member_is_replaced_after_the_session_timeout(broker: EmbeddedBroker) -> None:
    create(broker, "killed", 6)
    proc = _spawn(broker, "g-kill", "killed")
    members: list[Member] = []
    try:
        _read_until(proc, lambda a: len(a) == 6)
        members = [Member(broker, "g-kill", ["killed"]) for _ in range(2)]
        wait_for(lambda: sizes(members) == [2, 2], what="2/2 beside the worker")
        held = _read_until(proc, lambda a: len(a) == 2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        group = broker.broker.group_coordinator.consumer.groups["g-kill"]
        assert len(group.members) == 3  # no leave: only its session can end it
        wait_for(lambda: sizes(members) == [3, 3] and disjoint_cover(members, 6),
                 timeout=SESSION_MS / 1000 + 20, what="the killed member's partitions")
        took = time.monotonic() - killed
        print(f"partitions {held} of the killed member reassigned after {took * 1000:.0f} ms")
        assert len(group.members) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for m in members:
            m.close()


def test_committed_offsets_survive_a_broker_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        create(broker, "durable", 2)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(10):
            p.produce("durable", str(i).encode(), partition=0)
        p.flush(10)
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-durable",
                      "group.protocol": "consumer", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["durable"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 6 and time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 6
        c.commit(offsets=[TopicPartition("durable", 0, 6)], asynchronous=False)
        c.close()
    # the group's Kafka 4.x records, as Kafka's own dump tool would print them
    segments = sorted(tmp_path.glob("__consumer_offsets-*/*.log"))
    dumped = "".join(subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "dump-log", "--offsets-decoder", str(seg)],
        capture_output=True, text=True, timeout=60, check=True).stdout for seg in segments)
    for record in ("consumer_group_metadata::group=g-durable",
                   "consumer_group_member_metadata::group=g-durable",
                   "consumer_group_current_member_assignment::group=g-durable",
                   "offset_commit::group=g-durable,topic=durable,partition=0 => offset=6"):
        assert record in dumped
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = admin.list_consumer_groups().result(10).valid
        assert [(g.group_id, g.type, g.state) for g in listed if g.group_id == "g-durable"] == [
            ("g-durable", ConsumerGroupType.CONSUMER, ConsumerGroupState.EMPTY)]
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-durable",
                      "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        assert c.committed([TopicPartition("durable", 0)], timeout=10)[0].offset == 6
        c.subscribe(["durable"])
        first = first_offset(c, 0)
        c.close()
        assert first == 6


def test_a_regex_subscription_picks_up_a_topic_created_later(broker: EmbeddedBroker) -> None:
    create(broker, "rx-one", 2)
    create(broker, "other", 2)
    m = Member(broker, "g-regex", ["^rx-.*"], **{"topic.metadata.refresh.interval.ms": 500})
    try:
        wait_for(lambda: m.assigned == {("rx-one", 0), ("rx-one", 1)}, what="rx-one")
        create(broker, "rx-two", 3)
        took = wait_for(lambda: {t for t, _ in m.assigned} == {"rx-one", "rx-two"}
                        and len(m.assigned) == 5, what="rx-two")
        print(f"rx-two assigned {took * 1000:.0f} ms after it was created")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = admin.describe_consumer_groups(["g-regex"])["g-regex"].result(10)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        assert len(described.members[0].assignment.topic_partitions) == 5
    finally:
        m.close()


def test_classic_and_consumer_groups_side_by_side(broker: EmbeddedBroker) -> None:
    create(broker, "shared", 3)
    new = Member(broker, "g-new", ["shared"])
    classic = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-classic",
                        "group.protocol": "classic", "auto.offset.reset": "earliest"})
    classic.subscribe(["shared"])
    try:
        wait_for(lambda: len(new.partitions()) == 3, what="the consumer group")
        deadline = time.monotonic() + 30
        while len(classic.assignment()) < 3 and time.monotonic() < deadline:
            classic.poll(0.1)
        assert len(classic.assignment()) == 3
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
        assert listed["g-new"] == ConsumerGroupType.CONSUMER
        assert listed["g-classic"] == ConsumerGroupType.CLASSIC
        # a classic member joins a consumer group that has members as a classic member of
        # it (Kafka 4.x): it gets a share of the partitions; the group stays a consumer group
        joiner = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                           "group.id": "g-new", "group.protocol": "classic",
                           "heartbeat.interval.ms": 500})
        joiner.subscribe(["shared"])
        deadline = time.monotonic() + 30
        while not joiner.assignment() and time.monotonic() < deadline:
            joiner.poll(0.1)
        mine = {p.partition for p in joiner.assignment()}
        assert mine
        wait_for(lambda: not new.partitions() & mine and len(new.partitions()) == 3 - len(mine),
                 what="the consumer-protocol member giving the classic one its share")
        listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
        assert listed["g-new"] == ConsumerGroupType.CONSUMER
        joiner.close()  # a classic member leaving: the group stays a consumer group
        wait_for(lambda: len(new.partitions()) == 3, what="every partition back")
    finally:
        classic.close()
        new.close()


def test_a_static_member_restarted_gets_its_partitions_back_without_a_rebalance(
        broker: EmbeddedBroker) -> None:
    create(broker, "static", 4)
    first = Member(broker, "g-static", ["static"], **{"group.instance.id": "host-1"})
    other = Member(broker, "g-static", ["static"], **{"group.instance.id": "host-2"})
    try:
        wait_for(lambda: sizes([first, other]) == [2, 2]
                 and disjoint_cover([first, other], 4), what="2/2")
        held, theirs = first.partitions(), other.partitions()
        revoked_before = len(other.revoked)  # what the first 2/2 split moved does not count
        first.close()  # a static member leaves with epoch -2: its partitions wait for it
        again = Member(broker, "g-static", ["static"], **{"group.instance.id": "host-1"})
        took = wait_for(lambda: again.partitions() == held, what="the same partitions back")
        print(f"static member back on {sorted(held)} after {took * 1000:.0f} ms")
        assert other.partitions() == theirs  # nobody rebalanced
        assert len(other.revoked) == revoked_before
        again.close()
    finally:
        other.close()


def test_an_empty_classic_group_is_upgraded_and_keeps_its_offsets(
        broker: EmbeddedBroker) -> None:
    create(broker, "upgrade", 1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        p.produce("upgrade", str(i).encode(), partition=0)
    p.flush(10)
    classic = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-upgrade",
                        "group.protocol": "classic", "auto.offset.reset": "earliest",
                        "enable.auto.commit": False})
    classic.subscribe(["upgrade"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 4 and time.monotonic() < deadline:
        msg = classic.poll(0.1)
        if msg is not None and msg.error() is None:
            seen += 1
    classic.commit(offsets=[TopicPartition("upgrade", 0, 4)], asynchronous=False)
    classic.close()  # the classic group is empty now, its offsets stay
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    kinds = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
    assert kinds["g-upgrade"] == ConsumerGroupType.CLASSIC
    new = Member(broker, "g-upgrade", ["upgrade"], **{"enable.auto.commit": False})
    try:
        wait_for(lambda: bool(new.offsets), what="records for the upgraded group")
        assert new.offsets[0] == 4  # it resumed where the classic group had committed
        # asked through an AdminClient: the member's own consumer is polled by its thread,
        # and librdkafka's committed() called meanwhile from another thread can block
        asked = ConsumerGroupTopicPartitions("g-upgrade", [TopicPartition("upgrade", 0)])
        [future] = admin.list_consumer_group_offsets([asked]).values()
        assert future.result(10).topic_partitions[0].offset == 4
        kinds = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}
        assert kinds["g-upgrade"] == ConsumerGroupType.CONSUMER
    finally:
        new.close()
