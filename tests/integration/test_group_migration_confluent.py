"""Online migration of a classic group that has members (Kafka 4.x's
``group.consumer.migration.policy``): a classic confluent-kafka consumer is consuming when a
``group.protocol=consumer`` member joins; the group becomes a consumer group in which the
classic member keeps JoinGroup/SyncGroup/Heartbeat, both consume disjoint partitions, and
with synchronous commits no record is lost or consumed twice; when the consumer-protocol
member leaves, the group is a classic group again and the classic member takes everything."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedBroker

TOPIC, GROUP, PARTITIONS = "migrating", "g-migrating", 4
CONFIG = {
    "group.consumer.heartbeat.interval.ms": 250,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
}
DEADLINE_S = 60.0


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Runner:
    """A consumer on its own thread: every record it gets is noted, then its offset
    committed synchronously before the next poll."""

    def __init__(self, broker: EmbeddedBroker, name: str, **conf: Any) -> None:
        self.name = name
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                  "group.id": GROUP, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, **conf})
        self.got: list[tuple[int, int]] = []
        self.assigned: set[int] = set()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer.subscribe([TOPIC])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                with self.lock:
                    self.got.append((msg.partition(), msg.offset()))
                self.consumer.commit(message=msg, asynchronous=False)
            self.assigned = {p.partition for p in self.consumer.assignment()}

    def count(self) -> int:
        with self.lock:
            return len(self.got)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def produce(broker: EmbeddedBroker, n: int, start: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(start, start + n):
        p.produce(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(10) == 0


def test_a_classic_group_with_members_is_upgraded_and_downgraded_online(
        broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    coord = broker.broker.group_coordinator
    assert coord is not None
    produce(broker, 200, 0)
    classic = Runner(broker, "classic", **{"heartbeat.interval.ms": 500,
                                           "session.timeout.ms": 10000})
    modern: Runner | None = None
    try:
        wait_for(lambda: classic.count() >= 20 and len(classic.assigned) == PARTITIONS,
                 "the classic member consuming every partition")
        assert GROUP in coord.groups and GROUP not in coord.consumer.groups
        modern = Runner(broker, "consumer", **{"group.protocol": "consumer"})
        m = modern
        wait_for(lambda: GROUP in coord.consumer.groups, "the upgrade")
        assert GROUP not in coord.groups
        group = coord.consumer.groups[GROUP]
        wait_for(lambda: bool(classic.assigned) and bool(m.assigned)
                 and not classic.assigned & m.assigned
                 and classic.assigned | m.assigned == set(range(PARTITIONS)),
                 "disjoint assignments covering the topic")
        kinds = {mid: mem.subscription.classic is not None
                 for mid, mem in group.members.items()}
        assert sorted(kinds.values()) == [False, True]  # one classic member, one KIP-848
        before = (classic.count(), modern.count())
        produce(broker, 200, 200)
        wait_for(lambda: classic.count() + m.count() >= 400, "400 records")
        assert classic.count() > before[0] and modern.count() > before[1]  # both consumed
        modern.stop()
        modern.consumer.close()  # leaves: the last consumer-protocol member
        wait_for(lambda: GROUP in coord.groups and GROUP not in coord.consumer.groups,
                 "the downgrade")
        wait_for(lambda: classic.assigned == set(range(PARTITIONS)),
                 "the classic member taking every partition again")
        produce(broker, 100, 400)
        wait_for(lambda: classic.count() + m.count() >= 500, "500 records")
        every = classic.got + modern.got
        assert len(every) == len(set(every)) == 500  # none lost, none twice
        assert coord.groups[GROUP].protocol_type == "consumer"
        assert list(coord.groups[GROUP].members) != []
    finally:
        classic.stop()
        classic.consumer.close()
        if modern is not None:
            modern.stop()
