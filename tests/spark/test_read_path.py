"""Batch reads in ``path`` mode (log dirs read directly), on a real local SparkSession."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kafka_layout import PartitionWriter, write_partition

from tidelog.records import CompressionType, RecordBatchBuilder

pytestmark = pytest.mark.spark

TS0 = 1_700_000_000_000
COLS = "partition, offset, key, value, unix_millis(timestamp) AS ts, timestampType"


def _rows(part: int, start: int, n: int) -> list[tuple]:
    return [
        (TS0 + 10 * i, f"k{part}-{i}".encode() if i % 4 else None, f"v{part}-{i}".encode() * 5,
         [("i", str(i).encode()), ("p", None)] if i % 2 else [])
        for i in range(start, start + n)
    ]


def _write_topic(root: Path, topic: str, partitions: int, batches: int, per_batch: int,
                 codec: CompressionType = CompressionType.NONE) -> dict[int, list[tuple]]:
    written: dict[int, list[tuple]] = {}
    for p in range(partitions):
        data = [_rows(p, b * per_batch, per_batch) for b in range(batches)]
        write_partition(root / f"{topic}-{p}", data, compression=codec, segment_bytes=4096,
                        index_interval_bytes=512)
        written[p] = [r for b in data for r in b]
    return written


def _load(spark: Any, path: Path | str, **options: str) -> Any:
    reader = spark.read.format("tidelog").option("path", str(path))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _expected(written: dict[int, list[tuple]], ranges: dict[int, tuple[int, int]] | None = None) -> list[tuple]:
    out = []
    for p, rows in written.items():
        lo, hi = (ranges or {}).get(p, (0, len(rows)))
        out += [(p, o, rows[o][1], rows[o][2], rows[o][0], 0) for o in range(lo, hi)]
    return sorted(out)


def _got(df: Any) -> list[tuple]:
    return sorted(tuple(r) for r in df.selectExpr(*COLS.split(", ")).collect())


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_read_all_codecs_equals_written(spark: Any, tmp_path: Path, codec: CompressionType) -> None:
    written = _write_topic(tmp_path, "orders", 3, batches=12, per_batch=25, codec=codec)
    df = _load(spark, tmp_path, subscribe="orders", includeHeaders="true")
    assert _got(df) == _expected(written)
    headers = {(r.partition, r.offset): [(h.key, h.value) for h in r.headers or []]
               for r in df.select("partition", "offset", "headers").collect()}
    for p, rows in written.items():
        for o, row in enumerate(rows):
            assert headers[(p, o)] == [(k, v) for k, v in row[3]]
    assert df.select("topic").distinct().collect()[0].topic == "orders"


def test_schema_is_sparks_kafka_schema(spark: Any, tmp_path: Path) -> None:
    _write_topic(tmp_path, "t", 1, 1, 1)
    df = _load(spark, tmp_path, subscribe="t")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    with_headers = _load(spark, tmp_path, subscribe="t", includeHeaders="true")
    assert with_headers.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")


def test_offset_options_pick_exact_ranges(spark: Any, tmp_path: Path) -> None:
    written = _write_topic(tmp_path, "t", 2, batches=10, per_batch=20)
    df = _load(spark, tmp_path, subscribe="t",
               startingOffsets='{"t":{"0":17,"1":-2}}', endingOffsets='{"t":{"0":123,"1":-1}}')
    assert _got(df) == _expected(written, {0: (17, 123), 1: (0, 200)})
    assign = _load(spark, tmp_path, assign='{"t":[1]}', startingOffsets='{"t":{"1":150}}')
    assert _got(assign) == _expected({1: written[1]}, {1: (150, 200)})


def test_timestamp_options(spark: Any, tmp_path: Path) -> None:
    written = _write_topic(tmp_path, "t", 2, batches=10, per_batch=20)
    df = _load(spark, tmp_path, subscribe="t", startingTimestamp=str(TS0 + 10 * 55 - 3),
               endingOffsetsByTimestamp=f'{{"t":{{"0":{TS0 + 10 * 120},"1":{TS0 + 10 ** 9}}}}}')
    assert _got(df) == _expected(written, {0: (55, 120), 1: (55, 200)})
    by_partition = _load(spark, tmp_path, subscribe="t",
                         startingOffsetsByTimestamp=f'{{"t":{{"0":{TS0 + 10 * 199},"1":{TS0}}}}}')
    assert _got(by_partition) == _expected(written, {0: (199, 200), 1: (0, 200)})
    # startingTimestamp wins over startingOffsets (Spark's precedence)
    both = _load(spark, tmp_path, subscribe="t", startingTimestamp=str(TS0 + 10 * 190),
                 startingOffsets='{"t":{"0":0,"1":0}}')
    assert _got(both) == _expected(written, {0: (190, 200), 1: (190, 200)})
    with pytest.raises(Exception, match="no record at or after the starting timestamp"):
        _load(spark, tmp_path, subscribe="t", startingTimestamp=str(TS0 + 10**9)).collect()
    latest = _load(spark, tmp_path, subscribe="t", startingTimestamp=str(TS0 + 10**9),
                   startingOffsetsByTimestampStrategy="latest")
    assert latest.count() == 0


def test_subscribe_pattern_and_several_log_dirs(spark: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    wa = _write_topic(a, "events.eu", 1, 2, 5)
    wb = _write_topic(b, "events.us", 1, 3, 5)
    _write_topic(b, "other", 1, 1, 5)
    df = _load(spark, f"{a},{b}", subscribePattern=r"events\..*")
    got = sorted((r.topic, r.offset) for r in df.select("topic", "offset").collect())
    assert got == sorted([("events.eu", o) for o in range(len(wa[0]))] + [("events.us", o) for o in range(len(wb[0]))])


def test_min_partitions_splits_ranges(spark: Any, tmp_path: Path) -> None:
    written = _write_topic(tmp_path, "t", 2, batches=10, per_batch=20)
    df = _load(spark, tmp_path, subscribe="t", minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert _got(df) == _expected(written)
    assert _load(spark, tmp_path, subscribe="t").rdd.getNumPartitions() == 2


def test_fail_on_data_loss(spark: Any, tmp_path: Path) -> None:
    written = _write_topic(tmp_path, "t", 1, batches=10, per_batch=20)
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 50\n")
    with pytest.raises(Exception, match="no longer available"):
        _load(spark, tmp_path, subscribe="t", startingOffsets='{"t":{"0":10}}').collect()
    df = _load(spark, tmp_path, subscribe="t", startingOffsets='{"t":{"0":10}}', failOnDataLoss="false")
    assert _got(df) == _expected(written, {0: (50, 200)})
    # earliest means the log start offset
    assert _load(spark, tmp_path, subscribe="t").count() == 150


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "kafkaConsumer.pollTimeoutMs": "abc"}, "must be an integer"),
        ({"subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of the options subscribe"),
        ({}, "exactly one of the options subscribe"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "not allowed in batch"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, "not allowed in batch"),
        ({"subscribe": "t", "startingOffsets": '{"t":{"1":1}}'}, "must name every partition"),
        ({"subscribe": "t", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"subscribe": "t", "kafka.bootstrap.servers": "h:1"}, "contradict"),
        ({"subscribe": "t", "minPartitions": "0"}, "positive integer"),
        ({"subscribe": "t", "kafka.ssl.keystore.type": "JKS"}, "not supported"),
        ({"subscribe": "t", "kafka.group.id": "x", "kafka.auto.offset.reset": "earliest"}, "not supported"),
        ({"subscribe": "nope"}, "do not exist"),
        ({"subscribe": "t", "startingOffsets": '{"t":{"0":150}}', "endingOffsets": '{"t":{"0":100}}'},
         "after its ending offset"),
    ],
)
def test_bad_options_fail_at_planning(spark: Any, tmp_path: Path, options: dict[str, str], message: str) -> None:
    _write_topic(tmp_path, "t", 1, batches=10, per_batch=20)
    with pytest.raises(Exception, match=message):
        _load(spark, tmp_path, **options).collect()


def test_user_schema_is_rejected(spark: Any, tmp_path: Path) -> None:
    _write_topic(tmp_path, "t", 1, 1, 1)
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("tidelog").schema("value string").option("path", str(tmp_path)).option(
            "subscribe", "t").load().collect()


def test_missing_path_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist"):
        _load(spark, tmp_path / "nope", subscribe="t").collect()


def test_read_while_appending_never_returns_torn_batch(spark: Any, tmp_path: Path) -> None:
    """A writer thread appends 30-record gzip batches in 7-byte writes while Spark reads the
    dir again and again: every result is a whole number of batches, in order, no gaps."""
    d = tmp_path / "live-0"
    writer = PartitionWriter(d)
    writer.append_batch(_batch(0))
    writer.flush()
    log = d / f"{0:020d}.log"
    done = threading.Event()
    errors: list[BaseException] = []

    def append() -> None:
        try:
            with open(log, "ab", buffering=0) as f:
                for b in range(1, 100_000):
                    raw = _batch(b * 30)
                    for i in range(0, len(raw), 7):
                        f.write(raw[i : i + 7])
                    if done.is_set():
                        return
        except BaseException as e:  # surfaced below
            errors.append(e)

    t = threading.Thread(target=append)
    t.start()
    counts = set()
    try:
        for _ in range(4):
            df = _load(spark, tmp_path, subscribe="live")
            row = df.selectExpr(
                "count(*) AS n", "max(offset) AS hi",
                "sum(cast(cast(value AS string) AS long) - offset) AS drift",
            ).collect()[0]
            assert row.n == row.hi + 1  # starts at 0, no gaps, no duplicates below
            assert row.n % 30 == 0  # whole batches only
            assert row.drift == 0  # every value is the one written at that offset
            counts.add(row.n)
    finally:
        done.set()
        t.join()
    assert not errors
    assert len(counts) >= 2  # the reads really overlapped the appends


def _batch(base: int) -> bytes:
    b = RecordBatchBuilder(CompressionType.GZIP, base_offset=base)
    for i in range(30):
        b.append(TS0 + base + i, None, str(base + i).encode())
    return b.build()
