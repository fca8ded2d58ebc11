"""Transactions end to end: each Python client's transactional producer commits and aborts
across topics and partitions; read_committed consumers of all three see exactly the
committed records, read_uncommitted ones everything; offsets sent to a transaction become
visible only when it commits; a second producer fences the first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from txn_clients import (
    PRODUCERS,
    committed_offsets,
    lso,
    read_all,
    run_transactions,
)

from tidelog.testing import EmbeddedBroker

CONFIG = {
    "transaction.state.log.num.partitions": 5,
    "offsets.topic.num.partitions": 5,
    "num.partitions": 2,
}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


def _create(broker: EmbeddedBroker, *topics: str) -> None:
    for t in topics:
        broker.broker.replica_manager.create_topic(t, 2, {})


def _txns(tag: str, t1: str, t2: str) -> list[tuple[list[tuple[str, int, bytes]], bool]]:
    def batch(kind: str, n: int) -> list[tuple[str, int, bytes]]:
        return [((t1, t2)[i % 2], (i // 2) % 2, f"{tag}-{kind}-{i}".encode()) for i in range(n)]

    return [(batch("c1", 8), True), (batch("a1", 6), False), (batch("c2", 4), True),
            (batch("a2", 3), False)]


@pytest.mark.parametrize("producer", PRODUCERS)
def test_read_committed_sees_exactly_the_committed_records(broker: EmbeddedBroker,
                                                          producer: str) -> None:
    t1, t2 = f"in-{producer}-1", f"in-{producer}-2"
    _create(broker, t1, t2)
    txns = _txns(producer, t1, t2)
    run_transactions(producer, broker.bootstrap_servers, f"tid-{producer}", txns)
    tps = [(t, p) for t in (t1, t2) for p in (0, 1)]
    committed = sorted(m for msgs, ok in txns if ok for m in msgs)
    everything = sorted(m for msgs, _ in txns for m in msgs)
    for consumer in PRODUCERS:
        got = read_all(consumer, broker.bootstrap_servers, tps, committed=True,
                       expect=len(committed))
        assert sorted(got) == committed, consumer
        got = read_all(consumer, broker.bootstrap_servers, tps, committed=False,
                       expect=len(everything))
        assert sorted(got) == everything, consumer


@pytest.mark.parametrize("producer", PRODUCERS)
def test_offsets_sent_to_a_transaction_are_visible_only_after_commit(
        broker: EmbeddedBroker, producer: str) -> None:
    topic, group = f"src-{producer}", f"group-{producer}"
    _create(broker, topic)
    out = [(topic, 0, b"x")]
    bs = broker.bootstrap_servers
    run_transactions(producer, bs, f"off-{producer}", [(out, False)], {(topic, 0): 5}, group)
    assert committed_offsets(bs, group, [(topic, 0)])[(topic, 0)] < 0  # aborted: none
    run_transactions(producer, bs, f"off-{producer}", [(out, True)], {(topic, 1): 7}, group)
    assert committed_offsets(bs, group, [(topic, 0), (topic, 1)]) == {
        (topic, 0): -1001, (topic, 1): 7}


def test_second_producer_fences_the_first(broker: EmbeddedBroker) -> None:
    from confluent_kafka import KafkaException, Producer

    _create(broker, "fence")
    bs = broker.bootstrap_servers
    zombie = Producer({"bootstrap.servers": bs, "transactional.id": "fenced-id"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("fence", value=b"zombie", partition=0)
    zombie.flush(30)
    fresh = Producer({"bootstrap.servers": bs, "transactional.id": "fenced-id"})
    fresh.init_transactions(30)  # aborts the zombie's open transaction
    fresh.begin_transaction()
    fresh.produce("fence", value=b"fresh", partition=0)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        zombie.produce("fence", value=b"late", partition=0)
        zombie.commit_transaction(30)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    got = read_all("confluent", bs, [("fence", 0)], committed=True, expect=1)
    assert [v for _, _, v in got] == [b"fresh"]


def test_abandoned_transaction_is_aborted_after_its_timeout_and_the_lso_advances() -> None:
    """The coordinator's clock jumps past the timeout (a ManualClock, no waiting); the
    periodic abort task (every 50 ms here) fences the producer and aborts."""
    import time

    from confluent_kafka import KafkaException, Producer

    from tidelog.util.clock import ManualClock

    config = {**CONFIG, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 50}
    with EmbeddedBroker(config) as b:
        _create(b, "abandon")
        bs = b.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "transactional.id": "abandoned",
                      "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(3):
            p.produce("abandon", value=b"lost-%d" % i, partition=0)
        p.flush(30)
        assert lso(bs, "abandon", 0) == 0
        coord = b.broker.txn_coordinator
        later = ManualClock(int(time.time() * 1000) + 60_001 + 5_000)

        async def jump() -> None:
            coord.clock = coord.state.clock = later

        b.run(jump())
        deadline = time.monotonic() + 30
        while lso(bs, "abandon", 0) != 4 and time.monotonic() < deadline:
            pass  # polling the condition: the abort task runs on the broker's loop
        assert lso(bs, "abandon", 0) == 4  # 3 aborted records + the ABORT marker
        assert read_all("confluent", bs, [("abandon", 0)], committed=True, expect=0,
                        timeout=3) == []
        with pytest.raises(KafkaException):
            p.commit_transaction(30)


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_second_producer_fences_the_first_python_clients(broker: EmbeddedBroker,
                                                         client: str) -> None:
    from txn_clients import zombie_is_fenced

    topic = f"fence-{client}"
    _create(broker, topic)
    assert zombie_is_fenced(client, broker.bootstrap_servers, f"fenced-{client}", topic)
    got = read_all(client, broker.bootstrap_servers, [(topic, 0)], committed=True, expect=1)
    assert [v for _, _, v in got] == [b"fresh"]
