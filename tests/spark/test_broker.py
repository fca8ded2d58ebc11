"""Broker mode (``kafka.bootstrap.servers``): reads checked against confluent-kafka, and
DataFrame writes consumed back exactly. Real broker, real SparkSession."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP

pytestmark = pytest.mark.spark

TS0 = (int(time.time()) // 3600 - 24) * 3_600_000  # recent: brokers delete data older than retention.ms


def _produce(bootstrap: str, topic: str, partitions: int, n: int, codec: str = "none") -> None:
    # one record per batch: Tansu 0.6.0's ListOffsets "latest" is the last batch base + 1
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                  "batch.num.messages": 1, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=f"value-{i}".encode() * 3, key=f"k{i}".encode() if i % 3 else None,
                  partition=i % partitions, timestamp=TS0 + i, headers=[("n", str(i).encode())])
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out: list[tuple] = []
    idle = 0
    while len(out) < expected and idle < 40:
        msgs = c.consume(1000, timeout=0.5)
        idle += not msgs
        for m in msgs:
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1],
                        [(k, v) for k, v in (m.headers() or [])]))
    c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def _high_watermarks(bootstrap: str, topic: str, partitions: int) -> str:
    import json

    from tidelog.client.kafka_client import KafkaClient, TopicPartition

    with KafkaClient(bootstrap) as c:
        fetched = c.fetch({TopicPartition(topic, p): 0 for p in range(partitions)}, partition_max_bytes=1)
    return json.dumps({topic: {str(tp.partition): f.high_watermark for tp, f in fetched.items()}})


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _rows(df: Any) -> list[tuple]:
    out = [(r.partition, r.offset, r.key, r.value, r.ts, [(h.key, h.value) for h in r.headers or []])
           for r in df.selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
                                  "headers").collect()]
    return sorted(out, key=lambda r: (r[0], r[1]))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batch_read_equals_confluent_consumer(spark: Any, bootstrap: str, new_topic: Any, codec: str) -> None:
    topic = new_topic(2)
    _produce(bootstrap, topic, 2, 60, codec)
    expected = consume_all(bootstrap, topic, 2, 60)
    assert len(expected) == 60
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert _rows(df) == expected
    assert {r.topic for r in df.select("topic").collect()} == {topic}


def test_broker_offsets_and_min_partitions(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(2)
    _produce(bootstrap, topic, 2, 40)
    df = _read(spark, bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":5,"1":-2}}}}',
               endingOffsets=f'{{"{topic}":{{"0":12,"1":-1}}}}', minPartitions="5")
    assert df.rdd.getNumPartitions() >= 5
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(20)]


def test_dataframe_written_to_topic_is_consumed_back_exactly(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(3)
    rows = [(f"key-{i}" if i % 5 else None, f"payload-{i}", i % 3 if i % 2 else None,
             [(f"h{i % 2}", f"{i}".encode())]) for i in range(500)]
    df = spark.createDataFrame(
        rows, "key string, value string, partition int, headers array<struct<key:string,value:binary>>"
    )
    df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode(
        "append").save()
    consumed = consume_all(bootstrap, topic, 3, 500)
    assert len(consumed) == 500
    got = sorted(((k.decode() if k else None, v.decode(), h) for _, _, k, v, _, h in consumed),
                 key=lambda r: r[1])
    assert got == sorted(((k, v, [(hk, hv) for hk, hv in h]) for k, v, _, h in rows), key=lambda r: r[1])
    by_value = {v.decode(): p for p, _, _, v, _, _ in consumed}
    for _k, v, p, _h in rows:
        if p is not None:
            assert by_value[v] == p
    # and the tidelog reader reads the same records back
    # (ending offsets from Fetch's high watermark: Tansu's ListOffsets "latest" is off for
    # multi-record batches, see peers.py)
    back = _read(spark, bootstrap, subscribe=topic, endingOffsets=_high_watermarks(bootstrap, topic, 3)).selectExpr(
        "cast(value AS string) v").collect()
    assert sorted(r.v for r in back) == sorted(v for _, v, _, _ in rows)


def test_write_with_topic_column_and_keyed_partitioning(spark: Any, bootstrap: str, new_topic: Any) -> None:
    from tidelog.client.producer import default_partition

    t1, t2 = new_topic(4), new_topic(1)
    df = spark.createDataFrame([(t1 if i % 2 else t2, f"k{i}".encode(), b"v") for i in range(100)],
                               "topic string, key binary, value binary")
    df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option(
        "kafka.compression.type", "zstd").mode("append").save()
    c1 = consume_all(bootstrap, t1, 4, 50)
    assert len(c1) == 50 and len(consume_all(bootstrap, t2, 1, 50)) == 50
    assert all(p == default_partition(k, 4) for p, _, k, _, _, _ in c1)


@pytest.mark.parametrize(
    ("schema", "options", "mode", "message"),
    [
        ("key string", {"topic": "x"}, "append", "needs a 'value' column"),
        ("value int", {"topic": "x"}, "append", "must be string or binary"),
        ("value string", {}, "append", "no topic"),
        ("value string", {"topic": "x"}, "overwrite", "overwrite"),
        ("value string, partition string", {"topic": "x"}, "append", "column 'partition' must be int"),
        ("value string", {"topic": "x", "kafka.acks": "2"}, "append", "kafka.acks"),
        ("value string", {"topic": "x", "kafka.value.serializer": "y"}, "append", "not supported"),
    ],
)
def test_bad_writes_fail_at_planning(spark: Any, bootstrap: str, schema: str, options: dict[str, str],
                                     mode: str, message: str) -> None:
    df = spark.createDataFrame([], schema)
    w = df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).mode(mode)
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.save()


def test_path_and_bootstrap_for_write_is_rejected(spark: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
        df.write.format("tidelog").option("path", "/tmp/x").option("topic", "t").mode("append").save()
