"""Structured Streaming over a tiered-storage bucket: a real ``readStream.format("tidelog")``
query (``path=s3://bucket/prefix``, availableNow, a parquet file sink, a checkpoint) over the
segments a real broker (an EmbeddedBroker fed by confluent-kafka) copied to SeaweedFS.
The first run reads every record tiered so far once, in offset order per partition; after
more segments are tiered (the broker's ListOffsets -5 and its copy meters say so), a second
run of the same query from the checkpoint reads exactly the new records."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from test_read_bucket import PREFIX, bucket_options

from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.testing import EmbeddedBroker
from tidelog.testing.seaweedfs import S3Bucket

pytestmark = pytest.mark.spark

TOPIC = "streamed"
LATEST_TIERED = -5  # ListOffsets: the highest offset copied to remote storage (KIP-1005)
TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
    "remote.log.manager.task.interval.ms": "100",
    "log.initial.task.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
}
Produced = dict[tuple[int, int], str]  # (partition, offset) -> value


def _produce(bootstrap: str, start: int, n: int, produced: Produced) -> None:
    """``n`` records over both partitions, flushed every 8 (batches of 4 records, under
    1 KB): several 4 KiB segments per partition; each acknowledged (partition, offset) kept."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": "none"})

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        produced[(msg.partition(), msg.offset())] = msg.value().decode()

    for i in range(start, start + n):
        producer.produce(TOPIC, value=f"r{i:05d}-{uuid.uuid4().hex * 4}".encode(), partition=i % 2,
                         callback=done)
        if i % 8 == 7:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def _tiered(broker: EmbeddedBroker, client: KafkaClient) -> dict[int, int]:
    """Wait until every closed segment of both partitions is copied, by the broker's own
    word: ListOffsets -5 reaches the active segment's base - 1, and RemoteCopyRequests
    counts one copy per closed segment. Returns the highest tiered offset per partition."""
    tps = [TopicPartition(TOPIC, p) for p in range(2)]
    meters = broker.broker.remote_log_manager.metrics.topic(TOPIC)
    deadline = time.monotonic() + 60
    while True:
        bases = {p: sorted(int(f.stem) for f in (broker.log_dir / f"{TOPIC}-{p}").glob("*.log")) for p in range(2)}
        tiered = {tp.partition: off for tp, (off, _ts) in client.list_offsets(dict.fromkeys(tps, LATEST_TIERED)).items()}
        closed = sum(len(b) - 1 for b in bases.values())
        if all(tiered[p] == bases[p][-1] - 1 for p in range(2)) and meters.remote_copy_requests == closed:
            assert meters.remote_copy_errors == 0
            assert all(len(b) >= 3 for b in bases.values()), bases  # several segments each
            return tiered
        assert time.monotonic() < deadline, f"never tiered: {tiered}, {meters.as_dict()}, {bases}"
        time.sleep(0.1)


def _run(spark: Any, url: str, out: Path, creds: dict[str, str]) -> None:
    """One availableNow run of the query into a parquet file sink (its checkpoint in
    ``out``/ckpt), at most 150 offsets per micro-batch."""
    reader = (spark.readStream.format("tidelog").option("path", url).option("subscribe", TOPIC)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150").options(**creds))
    q = (reader.load().selectExpr("partition", "offset", "CAST(value AS STRING) AS v").writeStream
         .format("parquet").option("path", str(out / "data")).option("checkpointLocation", str(out / "ckpt"))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        assert not q.isActive
    finally:
        q.stop()


def _committed_files(out: Path) -> dict[int, list[Path]]:
    """The files of each micro-batch the file sink committed (its _spark_metadata log)."""
    batches = {}
    for entry in (out / "data" / "_spark_metadata").iterdir():
        if entry.name.isdigit():
            lines = entry.read_text().splitlines()[1:]  # after the "v1" version line
            batches[int(entry.name)] = [Path(urlparse(json.loads(line)["path"]).path) for line in lines]
    return batches


def _rows(files: list[Path]) -> list[tuple[int, int, str]]:
    """Rows of the files, each file's rows in the order its task wrote them."""
    out: list[tuple[int, int, str]] = []
    for f in files:
        t = pq.read_table(f)
        out += zip(t["partition"].to_pylist(), t["offset"].to_pylist(), t["v"].to_pylist(), strict=True)
    return out


def _check(got: list[tuple[int, int, str]], produced: Produced, low: dict[int, int], high: dict[int, int]) -> None:
    """``got`` is every produced record with low[p] <= offset <= high[p], once, in offset
    order within each partition."""
    want = {(p, o): v for (p, o), v in produced.items() if low[p] <= o <= high[p]}
    assert len(got) == len({(p, o) for p, o, _ in got}), "a record read twice"
    assert {(p, o): v for p, o, v in got} == want
    for p in range(2):
        offsets = [o for q, o, _ in got if q == p]
        assert offsets == sorted(offsets), f"partition {p} out of order"


def test_stream_over_bucket_reads_new_segments_once_from_checkpoint(
        spark: Any, tmp_path: Path, s3_bucket: S3Bucket) -> None:
    rsm = {**s3_bucket.rsm_configs, "rsm.config.key.prefix": PREFIX}
    url, creds, out = f"s3://{s3_bucket.name}/{PREFIX}", bucket_options(s3_bucket), tmp_path / "sink"
    produced: Produced = {}
    with EmbeddedBroker({**TIERED, **rsm}, log_dir=tmp_path / "broker") as broker, \
            KafkaClient(broker.bootstrap_servers) as client:
        client.create_topics({TOPIC: 2}, configs={TOPIC: {
            "remote.storage.enable": "true", "segment.bytes": "4096", "retention.ms": "-1"}})
        _produce(broker.bootstrap_servers, 0, 200, produced)
        first = _tiered(broker, client)
        _run(spark, url, out, creds)
        run1 = _committed_files(out)
        assert len(run1) >= 2  # 200 offsets, at most 150 a micro-batch
        _check(_rows([f for b in sorted(run1) for f in run1[b]]), produced, {0: 0, 1: 0}, first)

        _produce(broker.bootstrap_servers, 200, 160, produced)
        second = _tiered(broker, client)
        assert all(second[p] > first[p] for p in range(2)), (first, second)
        _run(spark, url, out, creds)
        run2 = {b: fs for b, fs in _committed_files(out).items() if b not in run1}
        assert run2 and min(run2) > max(run1)
        _check(_rows([f for b in sorted(run2) for f in run2[b]]), produced, {p: first[p] + 1 for p in range(2)}, second)
        # the records above the tiered ones (the active segments) were never in the bucket
        assert any(o > second[p] for p, o in produced)
