"""The tidelog source and sink behave like Spark's own Kafka connector, point by point (late
binding, offsets going backwards, kafka.* options, writes, minOffsetsPerTrigger, leniency,
headers). Real broker, real local SparkSession."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient
from test_broker import _read, consume_all

pytestmark = pytest.mark.spark


def _produce(bootstrap: str, topic: str, values: list[str], headers: dict[int, list[Any]] | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), headers=(headers or {}).get(i))
    assert p.flush(30) == 0


def _values(df: Any) -> list[str]:
    return sorted(r.v for r in df.selectExpr("CAST(value AS STRING) AS v").collect())


# -- 1. late binding ---------------------------------------------------------------------------
def test_earliest_and_latest_bind_when_the_action_runs(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, [f"a{i}" for i in range(5)])
    df = _read(spark, bootstrap, subscribe=topic)
    assert df.count() == 5
    _produce(bootstrap, topic, ["b0", "b1", "b2"])
    assert df.count() == 8  # the same DataFrame sees the records produced since
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([CkTP(topic, 0, 6)]).values():
        fut.result(30)
    assert _values(df) == ["b1", "b2"]  # and the records deleted since are not asked for


# -- 2. offsets going backwards ----------------------------------------------------------------
def _stream_once(spark: Any, bootstrap: str, topic: str, ckpt: Path, **options: str) -> list[str]:
    seen: list[str] = []

    def sink(df: Any, _batch_id: int) -> None:
        seen.extend(_values(df))

    reader = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return seen


def _recreate(client: Any, topic: str) -> None:
    client.delete_topics([topic])
    deadline = time.monotonic() + 30
    while True:
        try:
            client.create_topics({topic: 1})
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # deletion finishing in the background; poll until it has


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_offsets_going_backwards_are_reported(spark: Any, bootstrap: str, client: Any, new_topic: Any,
                                              tmp_path: Path, fail_on_data_loss: str) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, [f"old{i}" for i in range(10)])
    opts = {"failOnDataLoss": fail_on_data_loss}
    assert len(_stream_once(spark, bootstrap, topic, tmp_path, **opts)) == 10
    _recreate(client, topic)
    _produce(bootstrap, topic, ["new0", "new1", "new2"])
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match="offset was changed from 10 to 3"):
            _stream_once(spark, bootstrap, topic, tmp_path, **opts)
    else:  # Spark warns and goes on: the recreated partition is read from its earliest offset
        assert _stream_once(spark, bootstrap, topic, tmp_path, **opts) == ["new0", "new1", "new2"]


# -- 3. kafka.* options: honoured or rejected ----------------------------------------------------
@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("kafka.security.protocol", "SASL_GSSAPI", "must be one of"),
        ("kafka.ssl.truststore.password", "secret", "not supported"),
        ("kafka.max.poll.records", "10", "not supported for reads"),
    ],
)
def test_consumer_settings_that_cannot_work_are_rejected(spark: Any, bootstrap: str, new_topic: Any,
                                                         option: str, value: str, message: str) -> None:
    topic = new_topic(1)
    with pytest.raises(Exception, match=message):
        _read(spark, bootstrap, subscribe=topic, **{option: value}).collect()


def test_read_committed_leaves_out_aborted_transactions(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for values, commit in ((["c0", "c1", "c2"], True), (["a0", "a1"], False), (["c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode())
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    _produce(bootstrap, topic, ["plain"])
    committed = _read(spark, bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert _values(committed) == ["c0", "c1", "c2", "c3", "plain"]
    assert _values(_read(spark, bootstrap, subscribe=topic)) == ["a0", "a1", "c0", "c1", "c2", "c3", "plain"]


def test_honoured_consumer_settings(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, [f"v{i}" * 50 for i in range(20)])
    df = _read(spark, bootstrap, subscribe=topic, **{"kafka.max.partition.fetch.bytes": "64",
                                                     "kafka.client.id": "spark-test",
                                                     "kafka.isolation.level": "read_uncommitted"})
    assert df.count() == 20  # tiny fetches still make progress (grown for larger batches)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("kafka.partitioner.class", "org.example.MyPartitioner", "default partitioner"),
        ("kafka.ssl.keystore.type", "JKS", "not supported"),
        ("kafka.send.buffer.bytes", "131072", "not supported for writes"),
    ],
)
def test_producer_settings_that_cannot_work_are_rejected(spark: Any, bootstrap: str, option: str, value: str,
                                                         message: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=message):
        (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", "t")
         .option(option, value).mode("append").save())


def test_producer_settings_reach_librdkafka(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    df = spark.createDataFrame([(f"v{i}",) for i in range(50)], "value string")
    (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("kafka.linger.ms", "5").option("kafka.batch.size", "1024").option("kafka.compression.type", "gzip")
     .option("kafka.max.request.size", "1048576").option("kafka.acks", "1").mode("append").save())
    assert sorted(r[3] for r in consume_all(bootstrap, topic, 1, 50)) == sorted(f"v{i}".encode() for i in range(50))
    # an invalid value is librdkafka's own error, failing the write (never ignored)
    with pytest.raises(Exception, match=r"linger\.ms|queue\.buffering\.max\.ms"):  # librdkafka's alias
        (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("kafka.linger.ms", "-5").mode("append").save())


# -- 4. writes ---------------------------------------------------------------------------------
def test_default_save_mode_writes(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    df = spark.createDataFrame([("a",), ("b",)], "value string")
    df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
    (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .mode("errorifexists").save())
    assert sorted(r[3] for r in consume_all(bootstrap, topic, 1, 4)) == [b"a", b"a", b"b", b"b"]
    with pytest.raises(Exception, match="Ignore"):  # Spark's Kafka sink rejects Ignore too
        df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode(
            "ignore").save()


def test_write_to_a_missing_topic_auto_creates_it(spark: Any, bootstrap: str) -> None:
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    df = spark.createDataFrame([("k1", "x"), ("k2", "y")], "key string, value string")
    df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
    assert sorted(r[3] for r in consume_all(bootstrap, topic, 1, 2)) == [b"x", b"y"]


def test_delivery_errors_fail_the_write(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    df = spark.createDataFrame([("x", 7)], "value string, partition int")  # partition 7 does not exist
    with pytest.raises(Exception, match=r"not delivered|Unknown partition|UNKNOWN_PARTITION"):
        (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("kafka.delivery.timeout.ms", "3000").save())


def test_update_output_mode(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path) -> None:
    src, dst = new_topic(1), new_topic(1)
    _produce(bootstrap, src, ["a", "b", "a"])
    counts = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest").load()
              .selectExpr("CAST(value AS STRING) AS key").groupBy("key").count()
              .selectExpr("key", "CAST(count AS STRING) AS value"))
    q = (counts.writeStream.format("tidelog").outputMode("update").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path)).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    got = sorted((r[2], r[3]) for r in consume_all(bootstrap, dst, 1, 2))
    assert got == [(b"a", b"2"), (b"b", b"1")]


# -- 5. minOffsetsPerTrigger / maxTriggerDelay ---------------------------------------------------
def test_min_offsets_first_batch_and_trigger_once(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, [f"v{i}" for i in range(10)])
    batches: list[int] = []
    reader = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("minOffsetsPerTrigger", "1000").option("maxTriggerDelay", "1h"))
    q = (reader.load().writeStream.foreachBatch(lambda df, _i: batches.append(df.count()))
         .option("checkpointLocation", str(tmp_path / "a")).trigger(processingTime="50 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while not batches and time.monotonic() < deadline:
            q.awaitTermination(0.2)
        assert batches == [10]  # the first micro-batch runs at once, as in Spark
        _produce(bootstrap, topic, ["w0"])
        progress = len(q.recentProgress)
        while len(q.recentProgress) < progress + 2 and time.monotonic() < deadline:
            q.awaitTermination(0.2)  # several triggers pass ...
        assert batches == [10]  # ... but 1 new record is below the minimum: no batch
    finally:
        q.stop()
    # Trigger.Once reads everything available whatever the minimum (ReadAllAvailable)
    once: list[int] = []
    q = (reader.load().writeStream.foreachBatch(lambda df, _i: once.append(df.count()))
         .option("checkpointLocation", str(tmp_path / "b")).trigger(once=True).start())
    q.awaitTermination(300)
    assert q.exception() is None and sum(once) == 11


def test_max_trigger_delay_releases_a_small_batch(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, ["first"])
    batches: list[list[str]] = []
    q = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("minOffsetsPerTrigger", "1000").option("maxTriggerDelay", "300ms").load()
         .writeStream.foreachBatch(lambda df, _i: batches.append(_values(df)))
         .option("checkpointLocation", str(tmp_path)).trigger(processingTime="50 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while not batches and time.monotonic() < deadline:
            q.awaitTermination(0.2)
        _produce(bootstrap, topic, ["second"])
        while len([b for b in batches if b]) < 2 and time.monotonic() < deadline:
            q.awaitTermination(0.2)
        assert [b for b in batches if b] == [["first"], ["second"]]
    finally:
        q.stop()


# -- 6. leniency where Spark is lenient, strictness where it is strict ----------------------------
def test_lenient_options(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, ["x"])
    df = _read(spark, bootstrap, subscribe=topic, notAnOption="1", maxOffsetsPerTrigger="5",
               **{"kafka.group.id": "my-group"})
    assert _values(df) == ["x"]
    # subscribePattern is found in the name (Spark: topicRegex.findFirstIn)
    assert _values(_read(spark, bootstrap, subscribePattern=topic[2:8])) == ["x"]
    with pytest.raises(Exception, match="pollTimeoutMs must be an integer"):
        _read(spark, bootstrap, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "abc"}).collect()
    with pytest.raises(Exception, match="higher than maxOffsetsPerTrigger"):
        q = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("minOffsetsPerTrigger", "10").option("maxOffsetsPerTrigger", "5")
             .load().writeStream.format("console").start())
        try:
            q.awaitTermination(120)  # the source is built on the query's thread: the error comes here
        finally:
            q.stop()


# -- 7. headers --------------------------------------------------------------------------------
def test_records_without_headers_read_null(spark: Any, bootstrap: str, new_topic: Any) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, ["plain", "with"], headers={1: [("h", b"1")]})
    rows = _read(spark, bootstrap, subscribe=topic, includeHeaders="true").orderBy("offset").collect()
    assert rows[0].headers is None
    assert [(h.key, h.value) for h in rows[1].headers] == [("h", b"1")]


# -- exactly-once sink (kafka.transactional.id) ----------------------------------------------------
def _committed_values(bootstrap: str, topic: str, partitions: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out: list[str] = []
    idle = 0
    while idle < 6:
        msgs = c.consume(1000, timeout=0.5)
        idle = 0 if msgs else idle + 1
        out += [m.value().decode() for m in msgs if m.error() is None]
    c.close()
    return sorted(out)


def _pipe(spark: Any, bootstrap: str, src: str, dst: str, ckpt: Path, **sink: str) -> None:
    w = (spark.readStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "15").load()
         .selectExpr("value").writeStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", dst).option("checkpointLocation", str(ckpt)))
    for k, v in sink.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()


@pytest.mark.parametrize("transactional", [True, False])
def test_sink_commits_a_rerun_micro_batch_once(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path,
                                               transactional: bool) -> None:
    """The query is cut between the sink's commit of batch 2 and Spark's commit log (the commit
    file removed, as a kill at that moment leaves it), then restarted: Spark runs batch 2
    again. With kafka.transactional.id a read_committed reader sees the input exactly once;
    without it (Spark's at-least-once contract) batch 2 is duplicated: the check can fail."""
    src, dst = new_topic(2), new_topic(2)
    first = [f"r{i:03d}" for i in range(40)]
    _produce(bootstrap, src, first)
    sink = {"kafka.transactional.id": f"tx-{uuid.uuid4().hex[:8]}"} if transactional else {}
    ckpt = tmp_path / "ckpt"
    _pipe(spark, bootstrap, src, dst, ckpt, **sink)
    last = max(int(f.name) for f in (ckpt / "commits").iterdir() if f.name.isdigit())
    assert last >= 2
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    more = [f"s{i:03d}" for i in range(10)]
    _produce(bootstrap, src, more)
    _pipe(spark, bootstrap, src, dst, ckpt, **sink)
    got = _committed_values(bootstrap, dst, 2)
    if transactional:
        assert got == sorted(first + more)
    else:
        assert len(got) > len(first + more) and set(got) == set(first + more)


# -- TLS / SASL ----------------------------------------------------------------------------------
def test_reads_and_writes_over_sasl_ssl(spark: Any) -> None:
    """Spark's (Java) security option names, used by the librdkafka sink and the columnar reader."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from security_support import PLAIN_USERS, Pki, broker_props

    from tidelog.testing import EmbeddedBroker

    pki = Pki.create()
    with EmbeddedBroker(broker_props(pki)) as b:
        bootstrap = f"127.0.0.1:{b.broker.bound_ports['SASL_SSL']}"

        def security(password: str) -> dict[str, str]:
            return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                    "kafka.ssl.truststore.location": pki.ca_file, "kafka.ssl.truststore.type": "PEM",
                    "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                              f'required username="alice" password="{password}";'}

        topic = f"sec-{uuid.uuid4().hex[:8]}"
        df = spark.createDataFrame([(f"v{i}",) for i in range(5)], "value string")
        df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).options(
            **security(PLAIN_USERS["alice"])).save()
        assert _values(_read(spark, bootstrap, subscribe=topic, **security(PLAIN_USERS["alice"]))) == [
            f"v{i}" for i in range(5)]
        with pytest.raises(Exception, match=r"(?i)authentication"):
            _read(spark, bootstrap, subscribe=topic, **security("wrong")).collect()
