"""Produce appends written on the log dir's writer thread, through the broker with a real
librdkafka producer: batches of tidelog.log.append.writer.inline.bytes or more go to the
writer, smaller ones with no write in flight are written on the loop (by default every batch
under 1 MiB, a partition's first too: its leader epoch started, checkpoint written, when it
became leader), every acknowledged record is read back in order at contiguous offsets,
acks=all answers only once written; with
tidelog.log.append.writer.enable=false no writer thread exists and the same holds. One
Produce writes at most inline.bytes on the loop over all its partitions: the partitions past
that budget are handed to the writer."""

from __future__ import annotations

import threading
import time
from collections import Counter

import confluent_kafka as ck
import pytest

from tidelog.client.kafka_client import KafkaClient
from tidelog.client.kafka_client import TopicPartition as ClientTP
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TOPIC = "written"
N = 3000
VALUE = 1024


def _produce(bootstrap: str, start: int = 0) -> list[int]:
    offsets: list[int] = []
    errors: list[object] = []

    def done(err: object, msg: ck.Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "acks": "all", "linger.ms": 50, "batch.size": 512 * 1024,
                     "on_delivery": done})
    for i in range(start, start + N):
        p.produce(TOPIC, (b"%08d" % i).ljust(VALUE, b"."), partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    assert errors == []
    return offsets


def _consume(bootstrap: str) -> list[tuple[int, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(TOPIC, 0, ck.OFFSET_BEGINNING)])
    got: list[tuple[int, bytes]] = []
    try:
        for _ in range(200):
            for m in c.consume(1000, 0.5):
                assert m.error() is None
                got.append((m.offset(), m.value()[:8]))
            if len(got) >= 2 * N:
                break
    finally:
        c.close()
    return got


@pytest.mark.parametrize("config", [
    {"tidelog.log.append.writer.inline.bytes": str(64 << 10)},
    {},  # the default inline size (1 MiB): these batches are written on the loop
    {"tidelog.log.append.writer.enable": "false"},
], ids=["writer-64KiB", "default", "disabled"])
def test_large_batches_through_the_writer(config: dict[str, str]) -> None:
    enabled = config.get("tidelog.log.append.writer.enable") != "false"
    with EmbeddedBroker(config) as broker:
        rm = broker.broker.replica_manager
        handed = [0]
        real = rm._written

        def counting(*a: object) -> object:
            handed[0] += 1
            return real(*a)  # type: ignore[arg-type]

        rm._written = counting  # type: ignore[method-assign]
        offsets = _produce(broker.bootstrap_servers)
        assert sorted(offsets) == list(range(N))
        lg = rm.get_log(TopicPartition(TOPIC, 0))
        assert lg is not None and lg.log_end_offset == N and lg.high_watermark == N
        # this broker's writer (other brokers of the test process have their own log dirs)
        own = f"tidelog-append-{broker.log_dir.name}"
        writers = [t for t in threading.enumerate() if t.name == own]
        # a second round: no leader epoch starts, no write is in flight when it begins
        first = handed[0]
        offsets = _produce(broker.bootstrap_servers, N)
        assert sorted(offsets) == list(range(N, 2 * N))
        assert lg.log_end_offset == 2 * N and lg.high_watermark == 2 * N
        if not enabled:
            assert handed[0] == 0 and not writers
        elif config:
            assert writers, "large batches go to the log dir's writer thread"
            assert handed[0] > first, "batches over inline.bytes are handed over"
            assert lg.size_in_bytes > 64 << 10
        else:  # the first append too: its epoch was started when the topic was made
            assert handed[0] == 0, "batches under 1 MiB with none in flight: on the loop"
        got = _consume(broker.bootstrap_servers)
    assert [o for o, _ in got] == list(range(2 * N))
    assert [v for _, v in got] == [b"%08d" % i for i in range(2 * N)]


def _batch(partition: int, round_: int, n: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(now, None, (b"%d-%d-%06d" % (partition, round_, i)).ljust(VALUE, b"."))
                        for i in range(n)])


def test_one_produce_writes_at_most_inline_bytes_on_the_loop() -> None:
    """8 partitions in one Produce, each a batch just under 1 MiB (the default inline size,
    under the worker thread's 1 MiB): the first is written on the loop, the 7 past the
    request's budget go to the writer; 8 batches of 100 KB in one request (800 KB) all stay
    on the loop, the budget being the request's, not the connection's."""
    parts, big, small = 8, 900, 100  # records of 1 KiB per batch
    with EmbeddedBroker() as broker, KafkaClient(broker.bootstrap_servers) as client:
        rm = broker.broker.replica_manager
        handed: Counter[int] = Counter()
        real = rm._written

        def counting(partition: object, *a: object) -> object:
            handed[partition.topic_partition.partition] += 1  # type: ignore[attr-defined]
            return real(partition, *a)  # type: ignore[arg-type]

        rm._written = counting  # type: ignore[method-assign]
        client.create_topics({TOPIC: parts})
        tps = [ClientTP(TOPIC, p) for p in range(parts)]
        leader = client.leader_for(tps[0])
        assert all(client.leader_for(tp) == leader for tp in tps)
        sizes = {n: len(_batch(0, 0, n)) for n in (1, big, small)}
        assert parts * sizes[small] <= rm.inline_append_bytes < 2 * sizes[big]
        assert sizes[big] < rm.inline_append_bytes
        rounds = [1, big, small, big]  # (the epoch started when the partitions were made)
        counts = []
        for r, n in enumerate(rounds):
            before = handed.copy()
            out = client.produce(leader, {tp: _batch(tp.partition, r, n) for tp in tps})
            assert out is not None
            assert [out[tp][0] for tp in tps] == [sum(rounds[:r])] * parts
            counts.append(sorted(p for p in range(parts) if handed[p] > before[p]))
        assert counts[0] == [], "a partition's first append, small: on the loop"
        assert counts[1] == counts[3] == list(range(1, parts)), "past the budget: the writer"
        assert counts[2] == [], "within the request's budget: on the loop"
        for tp in tps:
            lg = rm.get_log(TopicPartition(TOPIC, tp.partition))
            assert lg is not None and lg.high_watermark == sum(rounds)
            got = [(rec.offset, rec.value[:10] if rec.value else b"")
                   for _, rec in client.iter_records(tp, 0, sum(rounds))]
            assert [o for o, _ in got] == list(range(sum(rounds)))
            assert [v for _, v in got] == [b"%d-%d-%06d" % (tp.partition, r, i)
                                           for r, n in enumerate(rounds) for i in range(n)]
