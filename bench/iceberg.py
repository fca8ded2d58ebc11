"""Iceberg topics, in one run against one EmbeddedBroker with its Schema Registry:

1. translation, per mode: records/s of one flush (read committed records, decode their
   values, build Arrow, write Parquet, commit to the SQLite catalog) next to a plain
   ``pyarrow.parquet`` write of the same decoded rows (the rows the flush produced, read back
   from the table, written with pyarrow's defaults and the table's codec: zstd, Iceberg's
   default), in the same run: ``key_value`` (raw key and value), ``avro``, ``json``
   and ``protobuf`` (``value_schema_id_prefix`` with confluent-kafka's AvroSerializer /
   JSONSerializer / ProtobufSerializer);
2. produce: records/s of one librdkafka producer into an Iceberg topic (translation running,
   target lag 1 s) and into a plain topic, in ``--rounds`` rounds of one run of each (the
   order alternating, ABBA; one untimed run of each first), the ratio paired per round
   (``--produce-records``, 20 x ``--records`` by default, so that a run lasts several
   target lags: a run shorter than the first flush measures nothing of the translator),
   with each run's CPU and run-queue wait of the producer and the broker
   (bench/iceberg_produce.py) and the translation's CPU. The producer runs in a
   process of its own, as a client does: in the broker's process its Python loop would
   share the interpreter lock with the broker's threads, and the ratio would measure the
   bench's client as much as the broker (``--producer-in-process``: as before);
3. lag: records produced at a fixed rate for a while into an Iceberg topic with a target lag;
   each record's lag is the commit time of the snapshot that first holds it minus its
   timestamp; p50/p99 printed next to the target.

The bench's process is the broker's, as ``tidelog serve``'s is, and takes serve's GIL switch
interval (server/gil.py: 1 ms; ``TIDELOG_GIL_TUNING=0``: CPython's 5 ms, what an embedded
broker keeps): the translation thread runs Python beside the event loop, which takes the
lock for each of its callbacks and, while a flush holds it, waits until the interval asks
the flush to hand it over; without serve's interval the produce phase measured a broker
that no deployment runs.

Figures are median [min .. max] over the repeats; ratios are per repeat (paired). Translation
is also given per CPU second of the bench's process (the broker runs in it; the flush's
thread and any it starts) and of the worker process: on a shared machine, wall times move
with the other work. The plain write runs on a thread at the translation's nice value
(``iceberg.translation.nice``), as the flush does. The run ends with the issue's three
figures, each with whether it is met.

    .venv/bin/python bench/iceberg.py [--records 100000] [--repeats 5] [--rounds 8] [--rate 5000]
        [--lag-seconds 15] [--target-lag-ms 2000] [--modes key_value,avro,json,protobuf]
        [--producer-in-process] [--producer-session] [--produce-records N]
        [--translation-nice N] [--translation-process] [--skip translation,produce,lag]

``--translation-process``: the broker's ``iceberg.translation.process`` (the table side of
translation in a worker process); the translation CPU figures are then the worker's (its
process CPU clock, read from /proc) and the nice value printed is the worker's.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from iceberg_produce import (  # bench/iceberg_produce.py: the produce phase
    ProducePhase,
    Producers,
    TranslationClock,
    create,
    drain,
    produce,
    ratio_range,
    rng_range,
)
from pyiceberg.catalog.sql import SqlCatalog

from tidelog.iceberg.priority import lower_thread_priority
from tidelog.server.gil import tune_switch_interval
from tidelog.testing import EmbeddedBroker

ORDER = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
        {"name": "qty", "type": "int"}, {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}


def serialize(registry: str, topic: str, n: int) -> list[bytes]:
    rng = random.Random(7)
    ser = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser({"id": i, "customer": f"c{rng.randrange(10_000)}", "qty": rng.randrange(100),
                 "price": rng.random() * 100, "note": None if i % 4 else "gift",
                 "tags": ["a", "b"][: i % 3]}, ctx) for i in range(n)]


JSON_ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                   "qty": {"type": "integer"}, "price": {"type": "number"},
                   "note": {"type": ["null", "string"]},
                   "tags": {"type": "array", "items": {"type": "string"}}},
}


def serialize_json(registry: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    rng = random.Random(7)
    ser = JSONSerializer(json.dumps(JSON_ORDER), SchemaRegistryClient({"url": registry}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser({"id": i, "customer": f"c{rng.randrange(10_000)}", "qty": rng.randrange(100),
                 "price": rng.random() * 100, "note": None if i % 4 else "gift",
                 "tags": ["a", "b"][: i % 3]}, ctx) for i in range(n)]


def order_message_class() -> type:
    """The Order message (proto3), built from its descriptor: no generated code needed."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="bench_order.proto", package="bench",
                                             syntax="proto3")
    m = fdp.message_type.add(name="Order")
    for number, (name, kind) in enumerate([("id", f.TYPE_INT64), ("customer", f.TYPE_STRING),
                                           ("qty", f.TYPE_INT32), ("price", f.TYPE_DOUBLE),
                                           ("note", f.TYPE_STRING)], 1):
        m.field.add(name=name, number=number, type=kind, label=f.LABEL_OPTIONAL)
    m.field.add(name="tags", number=6, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls: type = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))
    return cls


def serialize_protobuf(registry: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    rng = random.Random(7)
    cls = order_message_class()
    ser = ProtobufSerializer(cls, SchemaRegistryClient({"url": registry}),
                             {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [ser(cls(id=i, customer=f"c{rng.randrange(10_000)}", qty=rng.randrange(100),
                    price=rng.random() * 100, note="" if i % 4 else "gift",
                    tags=["a", "b"][: i % 3]), ctx) for i in range(n)]


def catalog(log_dir: Path) -> SqlCatalog:
    home = log_dir.resolve() / ".iceberg"
    return SqlCatalog("tidelog", uri=f"sqlite:///{home}/catalog.db",
                      warehouse=f"file://{home}/warehouse")


def codec(properties: dict[str, str]) -> str:
    """The table's Parquet codec (Iceberg's default zstd), which the plain write uses too."""
    return properties.get("write.parquet.compression-codec", "zstd")


def translation(b: EmbeddedBroker, values: list[bytes], scratch: Path, writer: ThreadPoolExecutor,
                mode: str = "value_schema_id_prefix") -> tuple[float, ...]:
    """(translation records/s, plain Parquet write records/s) of one flush of ``values``
    into the table of a topic translated before (its first flush, of a few records, has
    created the table: once in a topic's life, not part of translating), then the same two
    per CPU second of this process and the worker's (what a machine shared with other work
    hides least), then the same two per CPU second of their own threads only (the flush's
    thread, its translator's ``cpu_s``; the plain write's: the broker's other threads left
    out). The plain write runs on ``writer``'s thread, at the translation's nice value."""
    import pyarrow.compute as pc

    topic = f"t-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap_servers, topic, 6, True, 3_600_000, mode)  # flushed below, not by
    # the timer
    assert b.iceberg is not None
    service = b.iceberg
    deadline = time.monotonic() + 30
    while topic not in service.topics and time.monotonic() < deadline:
        time.sleep(0.05)
    warm = values[:600]
    produce(b.bootstrap_servers, topic, warm)
    assert b.run(service.flush_topic(topic), timeout=600).rows == len(warm)
    summary = catalog(b.log_dir).load_table(f"kafka.{topic}").current_snapshot().summary
    warm_ends = {int(p): o for p, o in json.loads(summary["tidelog.offsets"]).items()}
    produce(b.bootstrap_servers, topic, values)
    translator = service.topics[topic].translator
    worker = TranslationClock(b) if service.worker is not None else None  # its CPU too
    w0 = worker.seconds() if worker is not None else 0.0
    t0, c0, f0 = time.perf_counter(), time.process_time(), translator.cpu_s
    result = b.run(service.flush_topic(topic), timeout=600)
    translate, translate_cpu = time.perf_counter() - t0, time.process_time() - c0
    broker_cpu = translate_cpu  # the broker's process alone (with a worker: its side)
    translate_cpu += worker.seconds() - w0 if worker is not None else 0.0
    translate_thread = translator.cpu_s - f0
    assert result.rows == len(values), result
    table = catalog(b.log_dir).load_table(f"kafka.{topic}")
    rows = table.scan().to_arrow()
    partitions = pc.struct_field(rows.column("kafka"), "partition")
    ends = pa.array([warm_ends.get(p, 0) for p in range(6)], pa.int64()).take(partitions)
    rows = rows.filter(pc.greater_equal(pc.struct_field(rows.column("kafka"), "offset"),
                                        ends))  # the rows of the measured flush only
    assert rows.num_rows == len(values)
    c0 = time.process_time()
    plain, plain_thread = writer.submit(plain_write, rows, scratch / f"{topic}.parquet",
                                        codec(table.properties)).result()
    plain_cpu = time.process_time() - c0
    n = len(values)
    return (n / translate, n / plain, n / translate_cpu, n / plain_cpu, n / translate_thread,
            n / plain_thread, broker_cpu * 1000)


def plain_write(rows: pa.Table, path: Path, compression: str) -> tuple[float, float]:
    """pyarrow's own write of ``rows`` (its defaults, the table's codec): (wall seconds,
    this thread's CPU seconds)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    pq.write_table(rows, path, compression=compression)
    return time.perf_counter() - t0, time.thread_time() - c0


def lag(b: EmbeddedBroker, values: list[bytes], rate: float, target_ms: int,
        producers: Producers) -> list[float]:
    """Per-record lag (ms) from its timestamp to the commit of the snapshot that holds it."""
    from pyiceberg.exceptions import NoSuchTableError

    drain(b)
    topic = f"lag-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap_servers, topic, 6, True, target_ms)
    producers.produce(b.bootstrap_servers, topic, values, rate)
    deadline = time.monotonic() + target_ms / 1000 + 120
    while True:
        try:
            table = catalog(b.log_dir).load_table(f"kafka.{topic}")
            break
        except NoSuchTableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while time.monotonic() < deadline:
        table = table.refresh()
        snap = table.current_snapshot()
        done = json.loads(snap.summary["tidelog.offsets"]) if snap and snap.summary else {}
        if sum(done.values()) >= len(values):
            break
        time.sleep(0.5)
    commits: dict[int, list[tuple[int, int]]] = {}  # partition -> [(next offset, commit ms)]
    for s in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
        for p, o in json.loads(s.summary["tidelog.offsets"] if s.summary else "{}").items():
            commits.setdefault(int(p), []).append((int(o), s.timestamp_ms))
    rows = table.scan().to_arrow().column("kafka").to_pylist()
    out = []
    for r in rows:
        ts = int(r["timestamp"].timestamp() * 1000)
        committed = next(ms for o, ms in commits[r["partition"]] if o > r["offset"])
        out.append(committed - ts)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5, help="flushes a translation mode")
    ap.add_argument("--rounds", type=int, default=8,
                    help="produce rounds (one Iceberg run and one plain run each)")
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--lag-seconds", type=float, default=15)
    ap.add_argument("--target-lag-ms", type=int, default=2000)
    ap.add_argument("--modes", default="key_value,avro,json,protobuf")
    ap.add_argument("--skip", default="", help="phases to skip: translation,produce,lag")
    ap.add_argument("--producer-in-process", action="store_true",
                    help="the timed producers in the broker's process (default: a process "
                         "of their own)")
    ap.add_argument("--producer-session", action="store_true",
                    help="the producers' process in a session of its own")
    ap.add_argument("--translation-nice", type=int, default=None,
                    help="the broker's iceberg.translation.nice (default: its default)")
    ap.add_argument("--translation-process", action="store_true",
                    help="iceberg.translation.process=true: the table side in a worker "
                         "process")
    ap.add_argument("--produce-records", type=int, default=0,
                    help="records a produce run (default 20 x --records: several target "
                         "lags of 1 s, so that the translator flushes while it runs)")
    args = ap.parse_args()
    interval = tune_switch_interval()  # as ``tidelog serve`` does in the broker's process
    props = {"schema.registry.listeners": "http://127.0.0.1:0", "iceberg.enabled": "true",
             "iceberg.target.lag.ms": "1000"}
    if args.translation_nice is not None:
        props["iceberg.translation.nice"] = str(args.translation_nice)
    props["iceberg.translation.process"] = str(args.translation_process).lower()
    scratch = Path(tempfile.mkdtemp(prefix="iceberg-bench-", dir=os.environ.get("BENCH_DIR")))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} records a mode, "
          f"{args.repeats} repeats; both Parquet writes use the table's codec (zstd); GIL "
          f"switch interval {interval}")
    producers = Producers(args.producer_in_process, args.producer_session)
    try:
        run(args, props, scratch, producers)
    finally:
        producers.close()
        shutil.rmtree(scratch, ignore_errors=True)  # the plain Parquet writes of the runs
    print(f"load average {os.getloadavg()[0]:.2f}")


def run(args: argparse.Namespace, props: dict[str, str], scratch: Path,
        producers: Producers) -> None:
    verdicts: list[str] = []
    with EmbeddedBroker(props) as b:
        assert b.iceberg is not None
        values = serialize(b.schema_registry_url, "x", args.records)
        writer = ThreadPoolExecutor(1, initializer=functools.partial(  # the plain write at
            lower_thread_priority, b.iceberg.nice))  # the translation's nice (thread, worker)
        try:
            for name in [] if "translation" in args.skip else args.modes.split(","):
                verdicts.append(translation_mode(b, name, values, args, scratch, writer))
        finally:
            writer.shutdown()
        if "produce" not in args.skip:
            n = args.produce_records or 20 * args.records
            phase = ProducePhase(b, producers)
            rounds = phase.rounds((values * (n // len(values) + 1))[:n], args.rounds,
                                  values[: max(n // 4, 600)])
            phase.report(rounds)
            ratio = statistics.median(rounds.ratios())
            verdicts.append(f"produce to an Iceberg topic / a plain topic {ratio:.2f}x, the "
                            f"median of {args.rounds} paired rounds (>= 0.8x: "
                            f"{'yes' if ratio >= 0.8 else 'NO'})")
        if "lag" not in args.skip:
            n = int(args.rate * args.lag_seconds)
            lags = lag(b, (values * (n // len(values) + 1))[:n], args.rate,
                       args.target_lag_ms, producers)
            q = statistics.quantiles(lags, n=100)
            print(f"lag at {args.rate:,.0f} records/s for {args.lag_seconds:.0f} s, target "
                  f"{args.target_lag_ms} ms: p50 {q[49]:,.0f} ms, p99 {q[98]:,.0f} ms, "
                  f"max {max(lags):,.0f} ms")
            verdicts.append(f"lag p99 at {args.rate:,.0f} records/s {q[98]:,.0f} ms (<= "
                            f"target + 5 s: {'yes' if q[98] <= args.target_lag_ms + 5000 else 'NO'})")
    print("the issue's figures in this run:")
    for v in verdicts:
        print(f"  {v}")


def translation_mode(b: EmbeddedBroker, name: str, values: list[bytes],
                     args: argparse.Namespace, scratch: Path, writer: ThreadPoolExecutor
                     ) -> str:
    """The translation figures of one mode; returns its line of the verdict."""
    mode = "key_value" if name == "key_value" else "value_schema_id_prefix"
    serializers = {"json": serialize_json, "protobuf": serialize_protobuf}
    data = serializers[name](b.schema_registry_url, name, args.records) if (
        name in serializers) else values
    runs = [translation(b, data, scratch, writer, mode) for _ in range(args.repeats)]
    tr, pl, tr_cpu, pl_cpu, tr_thread, pl_thread, own = (list(x) for x in zip(*runs,
                                                                               strict=True))
    wall = [a / c for a, c in zip(tr, pl, strict=True)]
    cpu = [a / c for a, c in zip(tr_cpu, pl_cpu, strict=True)]
    print(f"[{name}] translation     records/s {rng_range(tr)}")
    print(f"[{name}] parquet write   records/s {rng_range(pl)}")
    print(f"[{name}] translation / parquet write: {ratio_range(wall)}; per repeat "
          + ", ".join(f"{x:.2f}" for x in wall))
    print(f"[{name}] per CPU second: translation {rng_range(tr_cpu)}, parquet write "
          f"{rng_range(pl_cpu)}, ratio {ratio_range(cpu)}; per repeat "
          + ", ".join(f"{x:.2f}" for x in cpu))
    print(f"[{name}] per CPU second of their threads: translation "
          f"{rng_range(tr_thread)}, parquet write {rng_range(pl_thread)}, ratio "
          f"{ratio_range([a / c for a, c in zip(tr_thread, pl_thread, strict=True)])}")
    print(f"[{name}] CPU ms of the broker's process in the flush (with a worker "
          f"process: the log side only) {rng_range(own)}")
    w, c = statistics.median(wall), statistics.median(cpu)
    return (f"{name} translation / plain Parquet write {w:.2f}x by wall time, {c:.2f}x by "
            f"CPU, medians of {args.repeats} (>= 0.5x: {'yes' if w >= 0.5 else 'NO'}, "
            f"{'yes' if c >= 0.5 else 'NO'})")


if __name__ == "__main__":
    main()
