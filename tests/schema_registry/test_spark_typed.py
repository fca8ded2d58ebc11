"""Spark typed columns: 100,000 Confluent-framed Avro records (a nested record, an array, a
map, a union and logical types) read by the tidelog source into a DataFrame whose schema and
rows equal what was produced, through the broker and then from the log dir with the broker
stopped (the registry read from the _schemas files); a schema evolved mid-topic reads through
the reader schema; PERMISSIVE and FAILFAST for malformed values."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.functions import struct
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from registry_support import RegistryBroker

pytestmark = pytest.mark.spark
TRADE = {
    "type": "record", "name": "Trade", "namespace": "typed",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "symbol", "type": "string"},
        {"name": "venue", "type": {"type": "record", "name": "Venue", "fields": [
            {"name": "code", "type": "string"}, {"name": "lot", "type": "int"}]}},
        {"name": "prices", "type": {"type": "array", "items": "double"}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 12, "scale": 2}},
    ],
}
EXPECTED = StructType([
    StructField("id", LongType(), False),
    StructField("symbol", StringType(), False),
    StructField("venue", StructType([StructField("code", StringType(), False),
                                     StructField("lot", IntegerType(), False)]), False),
    StructField("prices", ArrayType(DoubleType(), False), False),
    StructField("attrs", MapType(StringType(), StringType(), False), False),
    StructField("note", StringType(), True),
    StructField("day", DateType(), False),
    StructField("at", TimestampType(), False),
    StructField("amount", DecimalType(12, 2), False),
])
N = 100_000
EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def trade(i: int) -> dict[str, Any]:
    return {
        "id": i, "symbol": f"S{i % 97}", "venue": {"code": f"V{i % 7}", "lot": i % 100},
        "prices": [i / 4, i / 8][: i % 3], "attrs": {"k": str(i)} if i % 2 else {},
        "note": None if i % 5 else f"n{i}", "day": dt.date(2024, 1, 1) + dt.timedelta(i % 365),
        "at": EPOCH + dt.timedelta(milliseconds=i), "amount": Decimal(i) / 100,
    }


def produce(rb: RegistryBroker, topic: str, records: list[dict[str, Any]],
            schema: dict[str, Any]) -> None:
    client = SchemaRegistryClient({"url": rb.url})
    serializer = AvroSerializer(client, json.dumps(schema))
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": rb.bootstrap_servers, "linger.ms": 20})
    for r in records:
        producer.produce(topic, value=serializer(r, ctx))
        producer.poll(0)
    assert producer.flush(60) == 0


def rows(df: Any) -> list[dict[str, Any]]:
    out = []
    for row in df.orderBy("offset").select("value").toArrow().column(0).to_pylist():
        row = dict(row)
        row["attrs"] = dict(row["attrs"])
        out.append(row)
    return out


@pytest.mark.parametrize("n", [5_000, pytest.param(N, marks=pytest.mark.slow)])
def test_typed_avro_columns_broker_and_log_dir(spark: Any, tmp_path: Path, n: int) -> None:
    log_dir = tmp_path / "logs"
    sent = [trade(i) for i in range(n)]
    rb = RegistryBroker(log_dir=str(log_dir)).start()
    try:
        produce(rb, "trades", sent, TRADE)
        df = (spark.read.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
              .option("subscribe", "trades").option("valueFormat", "avro")
              .option("schema.registry.url", rb.url).load())
        assert df.schema["value"].dataType == EXPECTED
        assert rows(df) == sent
    finally:
        rb.stop()
    # the broker is gone: the log dir alone (its _schemas files give the schemas)
    df = (spark.read.format("tidelog").option("path", str(log_dir)).option("subscribe", "trades")
          .option("valueFormat", "avro").load())
    assert df.schema["value"].dataType == EXPECTED
    assert df.count() == n
    assert rows(df.where(f"offset >= {n - 10}")) == sent[n - 10:]


def test_evolution_and_modes(spark: Any, tmp_path: Path) -> None:
    v1 = {"type": "record", "name": "Ev", "fields": [{"name": "a", "type": "int"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"name": "b", "type": "string", "default": "none"}]}
    with RegistryBroker(log_dir=str(tmp_path / "logs")) as rb:
        produce(rb, "ev", [{"a": 1}, {"a": 2}], v1)
        produce(rb, "ev", [{"a": 3, "b": "x"}], v2)
        producer = Producer({"bootstrap.servers": rb.bootstrap_servers})
        producer.produce("ev", value=b"not avro")
        producer.flush(30)

        def read(**options: str) -> Any:
            reader = (spark.read.format("tidelog")
                      .option("kafka.bootstrap.servers", rb.bootstrap_servers)
                      .option("subscribe", "ev").option("valueFormat", "avro")
                      .option("schema.registry.url", rb.url))
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load()

        latest = read(mode="PERMISSIVE")
        assert [r.value.asDict() if r.value else None for r in latest.orderBy("offset").collect()] == [
            {"a": 1, "b": "none"}, {"a": 2, "b": "none"}, {"a": 3, "b": "x"}, None]
        pinned = read(mode="PERMISSIVE", valueSchemaVersion="1")
        assert [f.name for f in pinned.schema["value"].dataType.fields] == ["a"]
        assert [r.value.a for r in pinned.orderBy("offset").limit(3).collect()] == [1, 2, 3]
        with pytest.raises(Exception, match="Malformed records are detected"):
            read().collect()


def test_streaming_reads_typed_values(spark: Any, tmp_path: Path) -> None:
    with RegistryBroker() as rb:
        sent = [trade(i) for i in range(500)]
        produce(rb, "stream-trades", sent, TRADE)
        query = (spark.readStream.format("tidelog")
                 .option("kafka.bootstrap.servers", rb.bootstrap_servers)
                 .option("subscribe", "stream-trades").option("startingOffsets", "earliest")
                 .option("valueFormat", "avro").option("schema.registry.url", rb.url).load()
                 .select("offset", "value")
                 .writeStream.format("memory").queryName("typed_stream")
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        got = spark.table("typed_stream")
        assert got.schema["value"].dataType == EXPECTED
        assert rows(got) == sent


def test_writes_encode_a_struct_value(spark: Any) -> None:
    with RegistryBroker() as rb:
        rows_in = [(i, f"name{i}", {"k": i}, [i, i + 1], None if i % 2 else f"n{i}")
                   for i in range(50)]
        df = spark.createDataFrame(rows_in, "id long, name string, m map<string,int>, "
                                            "a array<int>, note string")
        (df.select(struct("id", "name", "m", "a", "note").alias("value"))
         .write.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
         .option("topic", "written").option("valueFormat", "avro")
         .option("schema.registry.url", rb.url).mode("append").save())
        client = SchemaRegistryClient({"url": rb.url})
        registered = json.loads(client.get_latest_version("written-value").schema.schema_str)
        assert registered["name"] == "topLevelRecord"
        assert registered["fields"][4] == {"name": "note", "type": ["string", "null"]}
        back = (spark.read.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
                .option("subscribe", "written").option("valueFormat", "avro")
                .option("schema.registry.url", rb.url).load())
        got = sorted((r.value.id, r.value.name, dict(r.value.m), list(r.value.a), r.value.note)
                     for r in back.collect())
        assert got == [(i, n, m, a, note) for i, n, m, a, note in rows_in]
        consumer = Consumer({"bootstrap.servers": rb.bootstrap_servers, "group.id": "w",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["written"])
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        consumer.close()
        assert msg is not None
        decoded = AvroDeserializer(client)(msg.value(), SerializationContext("written",
                                                                             MessageField.VALUE))
        assert decoded["name"].startswith("name")


PERSON = {
    "type": "object", "title": "Person",
    "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "score": {"type": "number"},
        "born": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]},
        "extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "nick": {"type": ["string", "null"]},
    },
    "required": ["name", "age"],
}


def test_typed_json_schema_columns(spark: Any) -> None:
    sent = [{"name": f"p{i}", "age": i, "score": i + 0.5, "born": f"2000-01-0{i % 9 + 1}",
             "tags": ["a"] * (i % 3), "address": {"city": "X"}, "extra": {"vip": i % 2 == 0},
             "nick": None if i % 2 else "n"} for i in range(200)]
    with RegistryBroker() as rb:
        serializer = JSONSerializer(json.dumps(PERSON), SchemaRegistryClient({"url": rb.url}))
        ctx = SerializationContext("people", MessageField.VALUE)
        producer = Producer({"bootstrap.servers": rb.bootstrap_servers})
        for p in sent:
            producer.produce("people", value=serializer(p, ctx))
        assert producer.flush(30) == 0
        df = (spark.read.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
              .option("subscribe", "people").option("valueFormat", "json")
              .option("schema.registry.url", rb.url).load())
        assert df.schema["value"].dataType == StructType([
            StructField("name", StringType(), False), StructField("age", LongType(), False),
            StructField("score", DoubleType(), True), StructField("born", DateType(), True),
            StructField("tags", ArrayType(StringType(), True), True),
            StructField("address", StructType([StructField("city", StringType(), False)]), True),
            StructField("extra", MapType(StringType(), BooleanType(), True), True),
            StructField("nick", StringType(), True)])
        values = df.orderBy("offset").select("value").toArrow().column(0).to_pylist()
        got = [{**v, "extra": dict(v["extra"])} for v in values]
        assert got == [{**p, "born": dt.date.fromisoformat(p["born"])} for p in sent]


def test_typed_protobuf_columns(spark: Any, tmp_path: Path) -> None:
    from test_confluent_json_protobuf import compile_protos

    customer = compile_protos(tmp_path)
    sent = []
    for i in range(100):
        msg = customer(name=f"c{i}", id=i, tags=["t"] * (i % 3), email=f"c{i}@x")
        msg.home.city = f"city{i % 5}"
        msg.since.seconds = 1_700_000_000 + i
        msg.scores["q"] = i
        sent.append(msg)
    log_dir = tmp_path / "logs"
    rb = RegistryBroker(log_dir=str(log_dir)).start()
    try:
        serializer = ProtobufSerializer(customer, SchemaRegistryClient({"url": rb.url}),
                                        {"use.deprecated.format": False})
        ctx = SerializationContext("customers", MessageField.VALUE)
        producer = Producer({"bootstrap.servers": rb.bootstrap_servers})
        for m in sent:
            producer.produce("customers", value=serializer(m, ctx))
        assert producer.flush(30) == 0
        df = (spark.read.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
              .option("subscribe", "customers").option("valueFormat", "protobuf")
              .option("schema.registry.url", rb.url).load())
        expected_type = StructType([
            StructField("name", StringType(), True), StructField("id", LongType(), True),
            StructField("home", StructType([StructField("city", StringType(), True),
                                            StructField("zip", StringType(), True)]), True),
            StructField("since", TimestampType(), True),
            StructField("tags", ArrayType(StringType(), False), True),
            StructField("scores", MapType(StringType(), IntegerType(), True), True),
            StructField("email", StringType(), True), StructField("phone", StringType(), True)])
        assert df.schema["value"].dataType == expected_type
        expected = [{"name": m.name, "id": m.id, "home": {"city": m.home.city, "zip": ""},
                     "since": m.since.ToDatetime(tzinfo=dt.UTC), "tags": list(m.tags),
                     "scores": dict(m.scores), "email": m.email, "phone": ""} for m in sent]

        def values(frame: Any) -> list[dict[str, Any]]:
            got = frame.orderBy("offset").select("value").toArrow().column(0).to_pylist()
            return [{**v, "scores": dict(v["scores"])} for v in got]

        assert values(df) == expected
    finally:
        rb.stop()
    # from the log dir alone: the stored .proto text is compiled with protoc
    df = (spark.read.format("tidelog").option("path", str(log_dir)).option("subscribe", "customers")
          .option("valueFormat", "protobuf").load())
    assert df.schema["value"].dataType == expected_type
    assert values(df) == expected


def test_typed_keys_and_values(spark: Any) -> None:
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "region", "type": "string"}]}
    with RegistryBroker() as rb:
        client = SchemaRegistryClient({"url": rb.url})
        keys = AvroSerializer(client, json.dumps(key_schema))
        values = AvroSerializer(client, json.dumps(TRADE))
        producer = Producer({"bootstrap.servers": rb.bootstrap_servers})
        for i in range(20):
            producer.produce(
                "keyed", key=keys({"region": f"r{i % 3}"}, SerializationContext("keyed", MessageField.KEY)),
                value=values(trade(i), SerializationContext("keyed", MessageField.VALUE)))
        assert producer.flush(30) == 0
        df = (spark.read.format("tidelog").option("kafka.bootstrap.servers", rb.bootstrap_servers)
              .option("subscribe", "keyed").option("keyFormat", "avro").option("valueFormat", "avro")
              .option("schema.registry.url", rb.url).load())
        assert df.schema["key"].dataType == StructType([StructField("region", StringType(), False)])
        assert df.schema["value"].dataType == EXPECTED
        got = df.orderBy("offset").select("key.region", "value.id").collect()
        assert [(r.region, r.id) for r in got] == [(f"r{i % 3}", i) for i in range(20)]
