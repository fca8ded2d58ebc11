"""Coordinators move with the leadership of their internal topics: a consumer group and a
transactional producer survive the SIGKILL of their coordinator's broker (three broker
processes, ZooKeeper session timeout 6 s)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.server.coordinator.transaction.records import partition_for as txn_partition_for
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

DEADLINE_S = 60.0
PAYMENT_PARTITIONS = 6


def _txn_coordinator(cluster: EmbeddedCluster, transactional_id: str, live: bool = False) -> int:
    """The leader of the id's ``__transaction_state`` partition, as ZooKeeper has it (with
    ``live``: after a kill, the new leader, the ISR shrunk to the live brokers)."""
    tp = TopicPartition("__transaction_state", txn_partition_for(transactional_id, 50))
    state = cluster.zk.get_topic_partition_states([tp])[tp]
    assert state.leader > 0 and (live or len(state.isr) == 3), state
    return int(state.leader)


def _group_coordinator(admin: AdminClient, group: str) -> int:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        if desc.coordinator is not None and desc.coordinator.id >= 0:
            return int(desc.coordinator.id)
        time.sleep(0.2)
    raise AssertionError("no coordinator")


def _poll_values(consumer: Consumer, want: int, timeout: float) -> list[bytes]:
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append(msg.value())
    return out


def _commit(consumer: Consumer) -> None:
    """A synchronous commit, retried until the client has found the new coordinator."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._NO_OFFSET:
                return  # nothing consumed since the last commit
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_consumer_group_keeps_its_offsets_and_rejoins_after_its_coordinator_is_killed(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce("orders", f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "g1",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
    })  # fmt: skip
    try:
        consumer.subscribe(["orders"])
        first = _poll_values(consumer, 10, DEADLINE_S)
        assert first == [f"v{i}".encode() for i in range(10)]
        consumer.commit(asynchronous=False)
        coordinator = _group_coordinator(admin, "g1")
        cluster.kill(coordinator)
        survivors = ",".join(f"127.0.0.1:{b.port}" for i, b in cluster.brokers.items()
                             if i != coordinator)
        producer = Producer({"bootstrap.servers": survivors, "acks": "all"})
        for i in range(10, 20):
            producer.produce("orders", f"v{i}".encode())
        assert producer.flush(DEADLINE_S) == 0
        # the group rejoins on the new coordinator, which loaded the committed offset (10):
        # had it been lost, the reset to earliest would hand out v0.. again
        after = _poll_values(consumer, 10, DEADLINE_S)
        assert after == [f"v{i}".encode() for i in range(10, 20)], after
        _commit(consumer)
        new = _group_coordinator(AdminClient({"bootstrap.servers": survivors}), "g1")
        assert new != coordinator
        committed = consumer.committed([ConfluentTopicPartition("orders", 0)], timeout=30)
        assert committed[0].offset == 20
    finally:
        consumer.close()


def _commit_transaction(producer: Producer) -> None:
    """commit_transaction, called again while librdkafka says the error is retriable (as its
    documentation asks): the coordinator's broker is dead until its session expires and the
    new coordinator has loaded the transaction log. An abortable or fatal error fails."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def test_open_transaction_at_its_coordinators_kill_commits(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # leaders spread over the three brokers: markers go to other brokers' partitions too
    admin.create_topics([NewTopic("payments", 6, 3)])["payments"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": "tx-1", "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    coordinator = _txn_coordinator(cluster, "tx-1")
    committed: list[bytes] = []
    for t in range(3):
        producer.begin_transaction()
        batch = [f"c{t}-{i}".encode() for i in range(PAYMENT_PARTITIONS)]
        for i, v in enumerate(batch):
            producer.produce("payments", v, partition=i % PAYMENT_PARTITIONS)
        producer.commit_transaction(30)
        committed += batch
    producer.begin_transaction()
    open_batch = [f"open-{i}".encode() for i in range(PAYMENT_PARTITIONS)]
    for i, v in enumerate(open_batch):
        producer.produce("payments", v, partition=i % PAYMENT_PARTITIONS)
    assert producer.flush(30) == 0
    cluster.kill(coordinator)
    # Kafka's new coordinator loads the transaction (Ongoing) from __transaction_state and
    # completes the retried EndTxn: the commit succeeds, and what it committed is read below
    _commit_transaction(producer)
    committed += open_batch
    assert _txn_coordinator(cluster, "tx-1", live=True) != coordinator
    # a new transaction on the new coordinator works
    producer.begin_transaction()
    after = [f"after-{i}".encode() for i in range(PAYMENT_PARTITIONS)]
    for i, v in enumerate(after):
        producer.produce("payments", v, partition=i % PAYMENT_PARTITIONS)
    _commit_transaction(producer)
    committed += after
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": "reader", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:  # assigned, not subscribed: __consumer_offsets waits for three live brokers
        consumer.assign([ConfluentTopicPartition("payments", p, OFFSET_BEGINNING)
                         for p in range(PAYMENT_PARTITIONS)])
        seen = _poll_values(consumer, len(committed), DEADLINE_S)
        seen += _poll_values(consumer, 1, 2.0)  # nothing more may come
    finally:
        consumer.close()
    assert sorted(seen) == sorted(committed)
    assert len(seen) == len(set(seen))


def _wait_full_isr(cluster: EmbeddedCluster, topics: dict[str, int]) -> None:
    tps = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
    deadline = time.monotonic() + 2 * DEADLINE_S
    while time.monotonic() < deadline:
        states = cluster.zk.get_topic_partition_states(tps)
        if len(states) == len(tps) and all(len(s.isr) == 3 for s in states.values()):
            return
        time.sleep(0.2)
    raise AssertionError("the restarted broker never rejoined every ISR")


@pytest.mark.slow
def test_a_group_and_transactions_survive_repeated_coordinator_kills(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    """Four rounds: a transaction open while the coordinator of the transactional id (even
    rounds) or of the group (odd rounds) is SIGKILLed and restarted, each committed; the group consumes
    read_committed throughout and commits after each round. At the end every committed
    record was consumed once and nothing else, and the group's offsets are the log ends."""
    cluster = tidelog_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("ledger", 3, 3)])["ledger"].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": "tx-soak", "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "soak",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
    })  # fmt: skip
    committed: list[bytes] = []
    seen: list[bytes] = []
    try:
        consumer.subscribe(["ledger"])
        for r in range(4):
            producer.begin_transaction()
            values = [f"r{r}-{i}".encode() for i in range(9)]
            for i, v in enumerate(values):
                producer.produce("ledger", v, partition=i % 3)
            assert producer.flush(30) == 0
            victim = (_txn_coordinator(cluster, "tx-soak") if r % 2 == 0
                      else _group_coordinator(admin, "soak"))
            cluster.kill(victim)
            _commit_transaction(producer)  # every round commits (the coordinator reloads it)
            committed += values
            seen += _poll_values(consumer, len(committed) - len(seen), DEADLINE_S)
            _commit(consumer)
            cluster.restart(victim)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            _wait_full_isr(cluster, {"ledger": 3, "__consumer_offsets": 50,
                                     "__transaction_state": 50})
        seen += _poll_values(consumer, 1, 2.0)  # nothing more; the last markers read
        _commit(consumer)
        offsets = consumer.committed([ConfluentTopicPartition("ledger", p) for p in range(3)],
                                     timeout=30)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(committed)
    ends = [Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "x"})
            .get_watermark_offsets(ConfluentTopicPartition("ledger", p), timeout=10)[1]
            for p in range(3)]
    assert [o.offset for o in offsets] == ends
