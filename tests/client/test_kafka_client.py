"""client/kafka_client.py against a real Kafka-compatible broker, cross-checked with confluent-kafka."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTP

from tidelog.client.kafka_client import (
    KafkaClient,
    KafkaClientError,
    TopicPartition,
    parse_bootstrap,
)
from tidelog.client.producer import Producer, default_partition, murmur2
from tidelog.records import CompressionType, build_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from peers import kafka_broker

# recent timestamps: a broker deletes records older than retention.ms (7 days)
T0 = (int(time.time()) // 3600 - 24) * 3_600_000


@pytest.fixture(scope="module", params=["tidelog", "tansu"])
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Our broker and an independent one (Tansu): the client must work with both."""
    with kafka_broker(request.param) as kb:
        yield kb


@pytest.fixture
def client(broker: tuple[str, str]) -> Iterator[KafkaClient]:
    with KafkaClient(broker[1], retry_backoff_ms=20) as c:
        yield c


def _topic(client: KafkaClient, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    client.create_topics({name: partitions})
    return name


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out: list[tuple] = []
    empty_polls = 0
    while len(out) < expected and empty_polls < 50:
        msgs = c.consume(1000, timeout=0.5)
        empty_polls += not msgs
        for m in msgs:
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or []))
    c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9"]) == [("::1", 9)]
    for bad in ("", "nohost", "h:x"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_murmur2_matches_kafka() -> None:
    # values from Kafka's UtilsTest#testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert default_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


def test_api_versions_negotiated(client: KafkaClient) -> None:
    versions = client.any_connection().versions
    assert {0, 1, 2, 3, 18, 19, 22} <= set(versions)
    assert 4 <= versions[1] <= 12 and 3 <= versions[0] <= 9


def test_create_metadata_delete(client: KafkaClient) -> None:
    name = _topic(client, 3)
    assert client.partitions_for(name) == [0, 1, 2]
    assert client.list_topics()[name] == [0, 1, 2]
    with pytest.raises(KafkaClientError, match="TOPIC_ALREADY_EXISTS"):
        client.create_topics({name: 1})
    client.delete_topics([name])
    assert name not in client.list_topics()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_produce_fetch_roundtrip_and_confluent_agrees(
    client: KafkaClient, broker: tuple[str, str], codec: CompressionType
) -> None:
    topic = _topic(client)
    tp = TopicPartition(topic, 0)
    rows = [
        (T0 + i, f"k{i}".encode() if i % 3 else None, f"v{i}".encode() * 10) for i in range(50)
    ]
    leader = client.leader_for(tp)
    result = client.produce(leader, {tp: build_batch(rows[:30], codec)})
    assert result == {tp: (0, -1)}
    client.produce(leader, {tp: build_batch(rows[30:], codec)})
    got = [(r.offset, r.timestamp, r.key, r.value) for _, r in client.iter_records(tp, 0, 50)]
    assert got == [(i, ts, k, v) for i, (ts, k, v) in enumerate(rows)]
    assert [(r.offset, r.value) for _, r in client.iter_records(tp, 35, 40)] == [
        (i, rows[i][2]) for i in range(35, 40)
    ]
    consumed = _consume_all(broker[1], topic, 1, 50)
    assert [(o, k, v) for _, o, k, v, _ in consumed] == [
        (i, k, v) for i, (_, k, v) in enumerate(rows)
    ]


def test_list_offsets_earliest_latest(client: KafkaClient) -> None:
    topic = _topic(client, 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    for i in range(4):  # one record per batch: Tansu's "latest" is the last batch base + 1
        client.produce(client.leader_for(tps[0]), {tps[0]: build_batch([(T0 + 100 * i, None, b"x")])})
    assert client.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    assert client.latest_offsets(tps) == {tps[0]: 4, tps[1]: 0}
    fetched = client.fetch({tps[0]: 0, tps[1]: 0})
    assert fetched[tps[0]].high_watermark == 4 and fetched[tps[1]].high_watermark == 0
    assert fetched[tps[1]].records == b""


@pytest.fixture(scope="module")
def tidelog_client() -> Iterator[KafkaClient]:
    """Our broker only: Tansu 0.6.0 answers every ListOffsets timestamp lookup with offset 0."""
    with kafka_broker("tidelog") as kb, KafkaClient(kb[1], retry_backoff_ms=20) as c:
        yield c


def test_offsets_for_times(tidelog_client: KafkaClient) -> None:
    client = tidelog_client
    topic = _topic(client)
    tp = TopicPartition(topic, 0)
    client.produce(
        client.leader_for(tp),
        {tp: build_batch([(T0 + 1000, None, b"a"), (T0 + 2000, None, b"b"), (T0 + 3000, None, b"c")])},
    )
    assert client.offsets_for_times({tp: T0 + 1500}) == {tp: 1}
    assert client.offsets_for_times({tp: T0 + 9999}) == {tp: None}


def test_fetch_unknown_partition_raises(client: KafkaClient) -> None:
    with pytest.raises(KafkaClientError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        client.partitions_for(f"missing-{uuid.uuid4().hex[:6]}")


def test_idempotent_producer_sequences_and_partitioner(
    client: KafkaClient, broker: tuple[str, str]
) -> None:
    topic = _topic(client, 3)
    producer = Producer(client, compression="lz4", batch_bytes=2000)
    assert producer.idempotent and producer.producer_id >= 0
    keys = [f"key-{i}".encode() for i in range(300)]
    for i, k in enumerate(keys):
        producer.send(topic, f"value-{i}".encode(), key=k, headers=[("n", str(i).encode())])
    producer.flush()
    assert producer.stats.records == 300 and producer.stats.batches > 3
    consumed = _consume_all(broker[1], topic, 3, 300)
    assert len(consumed) == 300
    for part, _off, key, value, headers in consumed:
        assert part == default_partition(key, 3)
        i = int(key.split(b"-")[1])
        assert value == f"value-{i}".encode() and headers == [("n", str(i).encode())]
    # per partition, values keep the send order
    for p in range(3):
        idx = [int(k.split(b"-")[1]) for part, _, k, _, _ in consumed if part == p]
        assert idx == sorted(idx)


def test_batches_carry_producer_id_and_consecutive_sequences(client: KafkaClient) -> None:
    topic = _topic(client)
    tp = TopicPartition(topic, 0)
    producer = Producer(client, batch_bytes=300)
    for i in range(40):
        producer.send(topic, b"x" * 20, partition=0, timestamp_ms=T0 + i)
    producer.flush()
    batches = list(client.iter_batches(tp, 0, 40))
    assert len(batches) > 2
    assert {b.producer_id for b in batches} == {producer.producer_id}
    seq = 0
    for b in batches:
        assert b.base_sequence == seq == b.base_offset
        seq += b.records_count
    assert seq == 40


def test_non_idempotent_acks_1(client: KafkaClient) -> None:
    topic = _topic(client)
    with pytest.raises(ValueError, match="acks=all"):
        Producer(client, acks=1)
    producer = Producer(client, acks=1, idempotent=False)
    producer.send(topic, b"v", partition=0)
    producer.flush()
    assert [r.value for _, r in client.iter_records(TopicPartition(topic, 0), 0, 1)] == [b"v"]
    with pytest.raises(ValueError, match="out of range"):
        producer.send(topic, b"v", partition=5)


def test_group_offsets_commit_and_fetch(client: KafkaClient, broker: tuple[str, str]) -> None:
    topic = _topic(client, 2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    client.commit_offsets(group, {tps[0]: 7})
    assert client.committed_offsets(group, tps) == {tps[0]: 7, tps[1]: -1}
    # a Kafka consumer of that group sees the commit (what lag tools read)
    c = Consumer({"bootstrap.servers": broker[1], "group.id": group})
    committed = c.committed([CkTP(topic, 0), CkTP(topic, 1)], timeout=10)
    c.close()
    assert [(p.partition, p.offset) for p in committed] == [(0, 7), (1, -1001)]


def test_confluent_produced_data_reads_back(client: KafkaClient, broker: tuple[str, str]) -> None:
    topic = _topic(client)
    p = CkProducer({"bootstrap.servers": broker[1], "compression.type": "zstd", "linger.ms": 5})
    for i in range(100):
        p.produce(
            topic,
            value=f"{i}".encode(),
            key=b"k",
            partition=0,
            timestamp=T0 + 5000 + i,
            headers=[("a", b"1")],
        )
    assert p.flush(10) == 0
    hw = client.fetch({TopicPartition(topic, 0): 0})[TopicPartition(topic, 0)].high_watermark
    assert hw == 100
    recs = [r for _, r in client.iter_records(TopicPartition(topic, 0), 0, hw)]
    assert [(r.offset, r.timestamp, r.value, r.headers) for r in recs] == [
        (i, T0 + 5000 + i, f"{i}".encode(), [("a", b"1")]) for i in range(100)
    ]
