"""Rows/s reading Confluent-framed Avro values into typed Spark columns (valueFormat=avro),
next to reading the same records as raw bytes, in the same run.

One topic of N Avro records (a nested record, an array, a map, a union and logical types),
produced with confluent-kafka's AvroSerializer into an EmbeddedBroker with its Schema
Registry; both reads go through the broker into the ``noop`` sink of a local[2]
SparkSession. Figures are min..max rows/s over RUNS timed runs after one warm-up each.

    .venv/bin/python bench/spark_typed.py [--records 200000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from decimal import Decimal
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tidelog.testing import EmbeddedBroker

RUNS = 3
SCHEMA = {
    "type": "record", "name": "Trade", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"}, {"name": "symbol", "type": "string"},
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


def record(i: int) -> dict[str, Any]:
    return {"id": i, "symbol": f"S{i % 97}", "venue": {"code": "X", "lot": i % 100},
            "prices": [i / 4, i / 8], "attrs": {"k": str(i)}, "note": None if i % 5 else "n",
            "day": dt.date(2024, 1, 1), "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
            "amount": Decimal(i) / 100}


def produce(bootstrap: str, url: str, n: int) -> None:
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(SCHEMA))
    ctx = SerializationContext("trades", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(n):
        producer.produce("trades", value=serializer(record(i), ctx))
        producer.poll(0)
    assert producer.flush(120) == 0


def timed(spark: Any, options: dict[str, str]) -> list[float]:
    reader = spark.read.format("tidelog")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    times = []
    for run in range(RUNS + 1):
        start = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        if run:
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    n = parser.parse_args().records
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    config = {"num.partitions": 2, "schema.registry.listeners": "http://127.0.0.1:0"}
    with EmbeddedBroker(config) as embedded:
        url = embedded.schema_registry_url
        produce(embedded.bootstrap_servers, url, n)
        spark = (SparkSession.builder.master("local[2]").appName("bench-typed")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.sql.session.timeZone", "UTC").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        tidelog.spark.register(spark)
        base = {"kafka.bootstrap.servers": embedded.bootstrap_servers, "subscribe": "trades"}
        raw = timed(spark, base)
        typed = timed(spark, {**base, "valueFormat": "avro", "schema.registry.url": url})
        spark.stop()
    r_raw = [n / t for t in raw]
    r_typed = [n / t for t in typed]
    print(f"{n} Avro records, 2 partitions, local[2], {RUNS} runs after a warm-up")
    print(f"raw bytes  : {min(r_raw):>10,.0f} .. {max(r_raw):>10,.0f} rows/s")
    print(f"typed avro : {min(r_typed):>10,.0f} .. {max(r_typed):>10,.0f} rows/s")
    print(f"typed/raw  : {min(r_typed) / max(r_raw):.2f} .. {max(r_typed) / min(r_raw):.2f}")


if __name__ == "__main__":
    main()
