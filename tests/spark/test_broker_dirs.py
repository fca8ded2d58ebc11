"""Path mode over log dirs written by a real tidelog broker, and broker-mode timestamp
options (which need a broker whose ListOffsets answers by record timestamp)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from peers import embedded_tidelog, has_embedded_tidelog
from test_broker import _read, _rows, consume_all

from tidelog.client.kafka_client import KafkaClient

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not has_embedded_tidelog(), reason="needs tidelog.testing.EmbeddedBroker"),
]

TS0 = (int(time.time()) // 3600 - 24) * 3_600_000  # recent: brokers delete data older than retention.ms
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce_codecs(bootstrap: str, topic: str, per_codec: int, pad: int = 0) -> None:
    n = 0
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for _ in range(per_codec):
            p.produce(topic, key=f"k{n % 13}".encode() if n % 5 else None, value=f"{codec}-{n}".encode() * 4 + os.urandom(pad),
                      partition=n % 2, timestamp=TS0 + n, headers=[("codec", codec.encode())])
            n += 1
        assert p.flush(30) == 0


def test_path_mode_reads_what_the_broker_wrote(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with embedded_tidelog(log_dir=data) as bootstrap:
        with KafkaClient(bootstrap) as c:
            c.create_topics({"orders": 2}, configs={"orders": {"segment.bytes": str(1 << 20)}})
        # ~1.2 MB per partition (random padding does not compress): more than one segment
        _produce_codecs(bootstrap, "orders", 60, pad=8000)
        expected = consume_all(bootstrap, "orders", 2, 300)
        assert len(expected) == 300
        live = spark.read.format("tidelog").option("path", str(data)).option("subscribe", "orders").option(
            "includeHeaders", "true").load()
        assert _rows(live) == expected  # the broker is running and owns the dir
        by_broker = _read(spark, bootstrap, subscribe="orders", includeHeaders="true")
        assert _rows(by_broker) == expected
    assert len(list((data / "orders-0").glob("*.log"))) > 1  # several segments were read
    stopped = spark.read.format("tidelog").load(str(data), subscribe="orders", includeHeaders="true")
    assert _rows(stopped) == expected


def test_broker_mode_timestamp_options(spark: Any, tmp_path: Path) -> None:
    with embedded_tidelog(log_dir=tmp_path / "data") as bootstrap:
        with KafkaClient(bootstrap) as c:
            c.create_topics({"ts": 2})
        _produce_codecs(bootstrap, "ts", 20)  # timestamps TS0 + n, n = 0..99, partition n % 2
        df = _read(spark, bootstrap, subscribe="ts", startingTimestamp=str(TS0 + 41),
                   endingOffsetsByTimestamp=f'{{"ts":{{"0":{TS0 + 80},"1":{TS0 + 10 ** 9}}}}}')
        got = sorted(r.ts - TS0 for r in df.selectExpr("unix_millis(timestamp) AS ts").collect())
        assert got == [n for n in range(41, 100) if n % 2 == 1 or n < 80]
        path_df = spark.read.format("tidelog").load(
            str(tmp_path / "data"), subscribe="ts", startingTimestamp=str(TS0 + 41),
            endingOffsetsByTimestamp=f'{{"ts":{{"0":{TS0 + 80},"1":{TS0 + 10 ** 9}}}}}')
        assert sorted(r.ts - TS0 for r in path_df.selectExpr("unix_millis(timestamp) AS ts").collect()) == got
