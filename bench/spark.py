"""Rows/s reading records into Spark through the tidelog data source, next to a baseline.

Three sources of the same rows (Spark's Kafka schema, 100-byte values, 2 partitions), each
read into the ``noop`` sink by a local[2] SparkSession in the same run:
  * baseline: an in-memory Python data source yielding ready-made pyarrow batches (the
    ceiling of Spark's Python Arrow read path on this machine),
  * path mode: a log dir in Kafka's layout (segments + indexes), read with storage/reader.py,
  * broker mode: the same batches in a broker, read over the wire: Tansu (Rust, memory
    storage) and tidelog's own EmbeddedBroker (in-process, on disk).
Figures are min..max rows/s over RUNS timed runs after one warm-up run.

Before them, the same records written in 10- and 1,000-record batches (--batch-sizes), read
in path mode and from a tidelog broker: median rows/s over --runs alternating runs and the
ratio to the large batches; with --baseline-src, the same reads by another commit's tree
(``git archive <commit> | tar -x -C DIR`` and its native core built with ``setup.py
build_ext --inplace``), alternating with this tree's in the same run.

    .venv/bin/python bench/spark.py [--records 2000000] [--skip-broker] [--skip-sources]
        [--runs 5] [--baseline-src DIR] [--python-side]

--python-side measures only the source's own reads without Spark (rows per CPU-second of a
fresh reading process per run), the same sizes and modes, alternating with the baseline tree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "spark"))

from tidelog.records import CompressionType, RecordBatchBuilder
from tidelog.spark.arrow import DDL, arrow_schema

RUNS = 3
PER_BATCH = 1000
PARTITIONS = 2
TS0 = (int(time.time()) // 3600 - 1) * 3_600_000  # recent: brokers delete data past retention


class MemPartition(InputPartition):
    def __init__(self, partition: int, rows: int) -> None:
        self.partition, self.rows = partition, rows


class MemReader(DataSourceReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        return [MemPartition(p, self.rows // PARTITIONS) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MemPartition)
        n = 65536
        value = b"v" * 100
        template = [
            pa.array([b"key-%d" % i for i in range(n)], pa.binary()),
            pa.array([value] * n, pa.binary()),
            pa.array(["bench"] * n, pa.string()),
            pa.array([partition.partition] * n, pa.int32()),
            None,
            pa.array([TS0 * 1000] * n, pa.timestamp("us", tz="UTC")),
            pa.array([0] * n, pa.int32()),
        ]
        schema = arrow_schema(False)
        done = 0
        while done < partition.rows:
            k = min(n, partition.rows - done)
            cols = [c.slice(0, k) if c is not None else pa.array(range(done, done + k), pa.int64())
                    for c in template]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
            done += k


class MemSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "benchmem"

    def schema(self) -> str:
        return DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return MemReader(int(self.options["rows"]))


def template_batch(codec: CompressionType = CompressionType.NONE, per_batch: int = PER_BATCH) -> bytes:
    b = RecordBatchBuilder(codec)
    for i in range(per_batch):
        b.append(TS0 + i, b"key-%d" % i, b"v" * 100)
    return b.build()


def make_log_dir(root: Path, records: int, per_batch: int = PER_BATCH) -> None:
    """Kafka's layout through the test helper; batches are one template with patched base
    offsets (the CRC does not cover the base offset)."""
    from kafka_layout import PartitionWriter

    raw = template_batch(per_batch=per_batch)
    for p in range(PARTITIONS):
        w = PartitionWriter(root / f"bench-{p}", segment_bytes=64 << 20, index_interval_bytes=4096)
        for _ in range(records // PARTITIONS // per_batch):
            w.append_batch(raw)
        w.flush()


def load_broker(bootstrap: str, records: int, per_batch: int = PER_BATCH) -> str:
    from tidelog.client.kafka_client import KafkaClient, TopicPartition

    raw = template_batch(per_batch=per_batch)
    with KafkaClient(bootstrap) as c:
        c.create_topics({"bench": PARTITIONS})
        for p in range(PARTITIONS):
            tp = TopicPartition("bench", p)
            leader = c.leader_for(tp)
            for _ in range(records // PARTITIONS // per_batch):
                c.produce(leader, {tp: raw})
        # the end from Fetch's high watermark (Tansu's ListOffsets "latest" is off, see tests)
        fetched = c.fetch({TopicPartition("bench", p): 0 for p in range(PARTITIONS)}, partition_max_bytes=1)
    return json.dumps({"bench": {str(tp.partition): f.high_watermark for tp, f in fetched.items()}})


def measure(spark: Any, make_df: Any, expected: int, runs: int = RUNS) -> list[float]:
    assert make_df().count() == expected  # warm-up, and the rows are all there
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        make_df().write.format("noop").mode("overwrite").save()
        rates.append(expected / (time.perf_counter() - t0))
    return rates


PLAIN_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
keys = [str(i) for i in range(n)]
value = b"v" * 100
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "partitioner": "murmur2_random"})
t0 = time.perf_counter()
for k in keys:
    while True:
        try:
            p.produce(topic, value, k)
            break
        except BufferError:
            p.poll(0.05)
assert p.flush(120) == 0
print(n / (time.perf_counter() - t0))
"""


def plain_producer_rate(bootstrap: str, topic: str, n: int) -> float:
    """A plain confluent-kafka producer loop in its own process (the broker runs in this one,
    and Spark's writers run in their own Python workers too), timed from first produce to flush."""
    out = subprocess.run([sys.executable, "-c", PLAIN_PRODUCER, bootstrap, topic, str(n)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def measure_writes(spark: Any, n: int) -> None:
    """The same rows (string key, 100-byte value) written by the tidelog sink (librdkafka, one
    producer per Python worker, 2 tasks) and by a plain confluent-kafka producer, into the same
    tidelog broker; interleaved runs after a warm-up of each."""
    from peers import embedded_tidelog

    df = spark.range(n, numPartitions=2).selectExpr(
        "CAST(id AS STRING) AS key", "repeat('v', 100) AS value").cache()
    df.count()

    def timed(fn: Any) -> float:
        t0 = time.perf_counter()
        fn()
        return n / (time.perf_counter() - t0)

    with embedded_tidelog() as bootstrap:
        from tidelog.client.kafka_client import KafkaClient

        with KafkaClient(bootstrap) as c:
            c.create_topics({"bench-write": 2})

        def sink() -> None:
            (df.write.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", "bench-write").mode("append").save())

        plain_producer_rate(bootstrap, "bench-write", n // 10)  # warm-up
        timed(sink)
        base, rates = [], []
        for _ in range(RUNS):
            base.append(plain_producer_rate(bootstrap, "bench-write", n))
            rates.append(timed(sink))
    print(f"{n:,} rows written (string key, 100-byte value) into one tidelog broker, {RUNS} runs")
    print(f"  baseline plain confluent-kafka producer: {fmt(base)}")
    print(f"  tidelog sink (librdkafka, 2 tasks)     : {fmt(rates, base)}")
    df.unpersist()


def fmt(rates: list[float], base: list[float] | None = None) -> str:
    text = f"{min(rates) / 1e6:.2f}..{max(rates) / 1e6:.2f} M rows/s"
    if base:
        text += f"  ({max(rates) / max(base):.2f}x baseline)"
    return text


def _read_df(spark: Any, where: str, ending: str | None) -> Any:
    """A read of topic ``bench`` from a log dir (``where`` a path) or a broker (a bootstrap)."""
    r = spark.read.format("tidelog").option("subscribe", "bench")
    if ending is None:
        return r.option("path", where).load()
    return r.option("kafka.bootstrap.servers", where).option("endingOffsets", ending).load()


class Baseline:
    """The same reads by another source tree (``--baseline-src``: a commit's files, its native
    core built), in a process of its own with its own SparkSession, run on request so its
    runs alternate with ours."""

    def __init__(self, src: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(Path(src) / "src"))
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve"], env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def rate(self, where: str, ending: str | None, n: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([where, ending, n]) + "\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def serve() -> None:
    """``--serve``: one timed read per request line (after a warm-up read of each source)."""
    import tidelog.spark.source

    print(f"baseline tree: {tidelog.spark.source.__file__}", file=sys.stderr, flush=True)
    spark = spark_session()
    warm: set[str] = set()
    for line in sys.stdin:
        where, ending, n = json.loads(line)

        def df(w: str = where, e: str | None = ending) -> Any:
            return _read_df(spark, w, e)

        if where not in warm:
            measure(spark, df, n, runs=1)
            warm.add(where)
        print(measure(spark, df, n, runs=1)[0], flush=True)
    spark.stop()


def read_once(where: str, ending: str, n: int) -> float:
    """``--read-once``: rows per CPU-second of this process reading topic ``bench`` (both
    partitions, offsets [0, n/2) each) with the source's own read_partition, no Spark: the
    Python side alone, after one warm-up read."""
    from tidelog.spark.backend import BackendSpec
    from tidelog.spark.source import TidelogPartition, read_partition

    spec = BackendSpec(paths=(where,)) if ending == "-" else BackendSpec(bootstrap_servers=where)

    def once() -> float:
        rows, t0 = 0, time.process_time()
        for p in range(PARTITIONS):
            for b in read_partition(TidelogPartition(spec, "bench", p, 0, n // PARTITIONS, False, True)):
                rows += b.num_rows
        assert rows == n, rows
        return n / (time.process_time() - t0)

    once()
    return once()


def measure_python_side(tmp: Path, n: int, sizes: list[int], runs: int, baseline_src: str | None) -> None:
    """``--python-side``: read_once for each size and mode, in a fresh process per run,
    alternating with the baseline tree's process."""
    from peers import embedded_tidelog

    trees = {"this tree": str(Path(__file__).resolve().parents[1] / "src")}
    if baseline_src:
        trees["baseline"] = str(Path(baseline_src) / "src")
    rates: dict[tuple[str, str, int], list[float]] = {}
    with contextlib.ExitStack() as stack:
        sources: dict[tuple[str, int], tuple[str, str]] = {}
        for size in sizes:
            make_log_dir(tmp / f"side-{size}", n, size)
            sources["path", size] = (str(tmp / f"side-{size}"), "-")
            bootstrap = stack.enter_context(embedded_tidelog())
            sources["broker", size] = (bootstrap, load_broker(bootstrap, n, size))
        for _ in range(runs):
            for (mode, size), (where, ending) in sources.items():
                for tree, path in trees.items():
                    out = subprocess.run([sys.executable, __file__, "--read-once", where, ending, str(n)],
                                         env=dict(os.environ, PYTHONPATH=path), capture_output=True,
                                         text=True, check=True)
                    rates.setdefault((tree, mode, size), []).append(float(out.stdout))
    top = max(sizes)
    print(f"Python side alone (no Spark), {n:,} records, {runs} alternating runs, rows per CPU-second "
          f"of the reading process; load average {os.getloadavg()[0]:.2f}")
    for tree, mode, size in sorted(rates, key=lambda k: (k[1], k[0] != "this tree", k[2])):
        print(f"  {mode:<6} mode, {size:>5}-record batches, {tree:<9}: "
              f"{fmt_median(rates[tree, mode, size], rates[tree, mode, top])}")


def measure_batch_sizes(spark: Any, tmp: Path, n: int, sizes: list[int], broker: bool,
                        runs: int, baseline: Baseline | None) -> None:
    """The same records written in batches of each size: rows/s in path mode and from an
    embedded tidelog broker, each against the largest size; runs alternate between sizes,
    modes and (with a baseline tree) the two trees."""
    from peers import embedded_tidelog, has_embedded_tidelog

    sources: dict[tuple[str, int], tuple[str, str | None]] = {}
    for size in sizes:
        make_log_dir(tmp / f"logs-{size}", n, size)
        sources["path", size] = (str(tmp / f"logs-{size}"), None)
    with contextlib.ExitStack() as stack:
        if broker and has_embedded_tidelog():
            for size in sizes:
                bootstrap = stack.enter_context(embedded_tidelog())
                sources["broker", size] = (bootstrap, load_broker(bootstrap, n, size))
        rates: dict[tuple[str, str, int], list[float]] = {}
        for where, ending in sources.values():  # warm-up
            measure(spark, lambda w=where, e=ending: _read_df(spark, w, e), n, runs=1)
        for _ in range(runs):
            for (mode, size), (where, ending) in sources.items():
                rates.setdefault(("this tree", mode, size), []).extend(
                    measure(spark, lambda w=where, e=ending: _read_df(spark, w, e), n, runs=1))
                if baseline is not None:
                    rates.setdefault(("baseline", mode, size), []).append(baseline.rate(where, ending, n))
    top = max(sizes)
    print(f"{n:,} records by batch size, {runs} alternating runs each, median (min..max), "
          f"ratio of medians to {top}-record batches; load average {os.getloadavg()[0]:.2f}")
    for tree, mode, size in sorted(rates, key=lambda k: (k[1], k[0] != "this tree", k[2])):
        text = fmt_median(rates[tree, mode, size], rates[tree, mode, top])
        if tree == "this tree" and ("baseline", mode, size) in rates:
            ours, theirs = rates[tree, mode, size], rates["baseline", mode, size]
            text += f", {statistics.median(ours) / statistics.median(theirs):.2f}x baseline"
        print(f"  {mode:<6} mode, {size:>5}-record batches, {tree:<9}: {text}")


def fmt_median(rates: list[float], base: list[float] | None) -> str:
    text = f"median {statistics.median(rates) / 1e6:.2f} M rows/s ({min(rates) / 1e6:.2f}..{max(rates) / 1e6:.2f})"
    if base:
        text += f"  {statistics.median(rates) / statistics.median(base):.2f}x"
    return text


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    spark = (SparkSession.builder.master("local[2]").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(spark)
    spark.dataSource.register(MemSource)
    return spark


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--skip-broker", action="store_true")
    ap.add_argument("--batch-sizes", default="10,1000",
                    help="records per batch compared in path and broker mode ('' to skip)")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs of the batch-size comparison")
    ap.add_argument("--baseline-src", help="a source tree of another commit (its native core "
                    "built) measured in the batch-size comparison, alternating with this one")
    ap.add_argument("--skip-sources", action="store_true",
                    help="only the batch-size comparison (no baseline, Tansu or write figures)")
    ap.add_argument("--write-records", type=int, default=500_000,
                    help="rows written to a tidelog broker (0 to skip the write figures)")
    ap.add_argument("--python-side", action="store_true",
                    help="only the batch-size comparison of the Python side alone (no Spark)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--read-once", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve()
    if args.read_once:
        where, ending, count = args.read_once
        print(read_once(where, ending, int(count)))
        return None
    if args.python_side:
        tmp = Path(tempfile.mkdtemp(prefix="tidelog-bench-spark-"))
        try:
            measure_python_side(tmp, args.records, [int(x) for x in args.batch_sizes.split(",") if x],
                                args.runs, args.baseline_src)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return None
    n = args.records // (PARTITIONS * PER_BATCH) * PARTITIONS * PER_BATCH
    spark = spark_session()
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-bench-spark-"))
    baseline = Baseline(args.baseline_src) if args.baseline_src else None
    try:
        sizes = [int(x) for x in args.batch_sizes.split(",") if x]
        if sizes:
            measure_batch_sizes(spark, tmp, n, sizes, not args.skip_broker, args.runs, baseline)
        if args.skip_sources:
            return
        print(f"{n:,} records, 100-byte values, {PARTITIONS} partitions, local[2], noop sink, {RUNS} runs")
        base = measure(spark, lambda: spark.read.format("benchmem").option("rows", str(n)).load(), n)
        print(f"  baseline in-memory Arrow source : {fmt(base)}")
        make_log_dir(tmp / "logs", n)
        path = measure(spark, lambda: spark.read.format("tidelog").option("path", str(tmp / "logs"))
                       .option("subscribe", "bench").load(), n)
        print(f"  path mode (log dir)            : {fmt(path, base)}")
        if not args.skip_broker:
            from peers import embedded_tidelog, has_embedded_tidelog, tansu

            brokers = [("Tansu", tansu)] + ([("tidelog", embedded_tidelog)] if has_embedded_tidelog() else [])
            for label, start in brokers:
                with start() as bootstrap:
                    ending = load_broker(bootstrap, n)
                    rates = measure(spark, lambda bs=bootstrap, e=ending: spark.read.format("tidelog").option(
                        "kafka.bootstrap.servers", bs).option("subscribe", "bench").option(
                        "endingOffsets", e).load(), n)
                    print(f"  broker mode ({label + ', wire)':<17}: {fmt(rates, base)}")
        if args.write_records and not args.skip_broker:
            measure_writes(spark, args.write_records)
    finally:
        if baseline is not None:
            baseline.close()
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
