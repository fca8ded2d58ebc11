"""Structured Streaming with the tidelog source and sink on a real local SparkSession."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka_layout import PartitionWriter
from test_broker import _produce, consume_all

from tidelog.client.kafka_client import TopicPartition

pytestmark = pytest.mark.spark

TS0 = (int(time.time()) // 3600 - 24) * 3_600_000  # recent: brokers delete data older than retention.ms


def _fill(w: PartitionWriter, start: int, n: int, per_batch: int = 10) -> None:
    for b in range(start, start + n, per_batch):
        w.append([(TS0 + i, None, f"{w.dir.name}:{i}".encode(), []) for i in range(b, min(b + per_batch, start + n))])
    w.flush()


def _run(spark: Any, checkpoint: Path, seen: list[tuple[int, list[str]]], **options: str) -> None:
    """One availableNow run into a foreachBatch sink that records each micro-batch."""
    reader = spark.readStream.format("tidelog")
    for k, v in options.items():
        reader = reader.option(k, v)

    def sink(df: Any, batch_id: int) -> None:
        seen.append((batch_id, [r.v for r in df.selectExpr("cast(value AS string) v").collect()]))

    q = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
         .trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()


def test_max_offsets_per_trigger_bounds_batches_and_restart_reads_only_new(spark: Any, tmp_path: Path) -> None:
    logs, ckpt = tmp_path / "logs", tmp_path / "ckpt"
    w0, w1 = PartitionWriter(logs / "clicks-0"), PartitionWriter(logs / "clicks-1")
    _fill(w0, 0, 300)
    _fill(w1, 0, 100)
    seen: list[tuple[int, list[str]]] = []
    opts = {"path": str(logs), "subscribe": "clicks", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "120"}
    _run(spark, ckpt, seen, **opts)
    sizes = [len(vals) for _, vals in seen if vals]
    assert sum(sizes) == 400 and len(sizes) >= 4
    assert max(sizes) <= 120
    first = [v for _, vals in seen for v in vals]
    assert sorted(first) == sorted([f"clicks-0:{i}" for i in range(300)] + [f"clicks-1:{i}" for i in range(100)])

    # new data in an old partition plus a brand-new partition, then restart from the checkpoint
    _fill(w0, 300, 50)
    w2 = PartitionWriter(logs / "clicks-2")
    _fill(w2, 0, 30)
    seen.clear()
    _run(spark, ckpt, seen, **opts)
    second = [v for _, vals in seen for v in vals]
    assert sorted(second) == sorted([f"clicks-0:{i}" for i in range(300, 350)] + [f"clicks-2:{i}" for i in range(30)])
    assert max(len(vals) for _, vals in seen) <= 120


def test_starting_offsets_latest_by_default(spark: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    w = PartitionWriter(logs / "t-0")
    _fill(w, 0, 40)
    seen: list[tuple[int, list[str]]] = []
    _run(spark, tmp_path / "ckpt", seen, path=str(logs), subscribe="t")
    assert [v for _, vals in seen for v in vals] == []
    _fill(w, 40, 5)
    _run(spark, tmp_path / "ckpt", seen, path=str(logs), subscribe="t")
    assert sorted(v for _, vals in seen for v in vals) == sorted(f"t-0:{i}" for i in range(40, 45))


def test_streaming_rejects_batch_only_options(spark: Any, tmp_path: Path) -> None:
    PartitionWriter(tmp_path / "t-0").flush()
    with pytest.raises(Exception, match="batch queries only"):
        spark.readStream.format("tidelog").option("path", str(tmp_path)).option("subscribe", "t").option(
            "endingOffsets", "latest").load().writeStream.format("noop").start().awaitTermination(60)


def test_commit_offsets_to_group_visible_to_kafka_tools(
    spark: Any, bootstrap: str, new_topic: Any, client: Any, tmp_path: Path
) -> None:
    topic = new_topic(1)
    _produce(bootstrap, topic, 1, 30)
    group = f"spark-{uuid.uuid4().hex[:8]}"
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "10", "commitOffsetsToGroup": group}
    seen: list[tuple[int, list[str]]] = []
    _run(spark, tmp_path / "ckpt", seen, **opts)
    assert [len(v) for _, v in seen if v] == [10, 10, 10]
    tp = TopicPartition(topic, 0)
    after_first = client.committed_offsets(group, [tp])[tp]
    # committed when Spark asks for offsets after a batch ran, so the last batch is in too
    assert after_first == 30
    _run(spark, tmp_path / "ckpt", seen, **opts)
    assert client.committed_offsets(group, [tp])[tp] == 30


def test_stream_from_log_dir_into_topic(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    w = PartitionWriter(logs / "src-0")
    _fill(w, 0, 120)
    topic = new_topic(2)
    q = (spark.readStream.format("tidelog").option("path", str(logs)).option("subscribe", "src")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "50").load()
         .selectExpr("CAST(offset AS STRING) AS key", "value")
         .writeStream.format("tidelog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert q.exception() is None
    consumed = consume_all(bootstrap, topic, 2, 120)
    assert sorted((int(k), v.decode()) for _, _, k, v, _, _ in consumed) == [(i, f"src-0:{i}") for i in range(120)]
