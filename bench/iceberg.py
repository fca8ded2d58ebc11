"""Iceberg topics, in one run against one EmbeddedBroker with its Schema Registry:

1. translation, per mode: records/s of one flush (read committed records, decode their
   values, build Arrow, write Parquet, commit to the SQLite catalog) next to a plain
   ``pyarrow.parquet`` write of the same decoded rows (the rows the flush produced, read back
   from the table, written with pyarrow's defaults and the table's codec: zstd, Iceberg's
   default), in the same run: ``key_value`` (raw key and value), ``avro``, ``json``
   and ``protobuf`` (``value_schema_id_prefix`` with confluent-kafka's AvroSerializer /
   JSONSerializer / ProtobufSerializer);
2. produce: records/s of one librdkafka producer into an Iceberg topic (translation running,
   target lag 1 s) and into a plain topic, alternating (``--produce-records``, 20 x
   ``--records`` by default, so that a run lasts several target lags: a run shorter than
   the first flush measures nothing of the translator), with the broker process's CPU
   seconds per run and the translation thread's share of them. The producer runs in a
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
thread and any it starts): on a shared machine, wall times move with the other work.

    .venv/bin/python bench/iceberg.py [--records 100000] [--repeats 3] [--rate 5000]
        [--lag-seconds 15] [--target-lag-ms 2000] [--modes key_value,avro,json,protobuf]
        [--producer-in-process] [--producer-session] [--produce-records N]
        [--translation-nice N] [--translation-process] [--skip translation,produce,lag]

``--translation-process``: the broker's ``iceberg.translation.process`` (the table side of
translation in a worker process); the translation CPU figures are then the worker's (its
process CPU clock, read from /proc) and the nice value printed is the worker's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from multiprocessing.pool import Pool
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog.sql import SqlCatalog

from tidelog.metrics.histogram import LatencyHistogram
from tidelog.metrics.loop_lag import LOOP_LAG
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


def rng_range(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):,.0f} [{min(xs):,.0f} .. {max(xs):,.0f}]"


def ratio_range(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.2f}x [{min(xs):.2f} .. {max(xs):.2f}]"


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


def create(bootstrap: str, topic: str, partitions: int, iceberg: bool, lag_ms: int,
           mode: str = "value_schema_id_prefix") -> None:
    configs = {"tidelog.iceberg.mode": mode,
               "tidelog.iceberg.target.lag.ms": str(lag_ms)} if iceberg else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], rate: float = 0) -> float:
    """records/s acknowledged (``rate`` > 0: paced to that many records/s)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    t0 = time.perf_counter()
    for i, v in enumerate(values):
        if rate and i % 100 == 0:
            ahead = t0 + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=v)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    return len(values) / (time.perf_counter() - t0)


class Producers:
    """Where the timed produce runs: a process of its own (spawned once; the values are
    sent to it with each run, outside its timing) or this one."""

    def __init__(self, in_process: bool, own_session: bool = False) -> None:
        self.pool: Pool | None = None if in_process else multiprocessing.get_context(
            "spawn").Pool(1, initializer=os.setsid if own_session else None)

    def produce(self, bootstrap: str, topic: str, values: list[bytes], rate: float = 0
                ) -> float:
        if self.pool is None:
            return produce(bootstrap, topic, values, rate)
        got: float = self.pool.apply(produce, (bootstrap, topic, values, rate))
        return got

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()


def catalog(log_dir: Path) -> SqlCatalog:
    home = log_dir.resolve() / ".iceberg"
    return SqlCatalog("tidelog", uri=f"sqlite:///{home}/catalog.db",
                      warehouse=f"file://{home}/warehouse")


def codec(properties: dict[str, str]) -> str:
    """The table's Parquet codec (Iceberg's default zstd), which the plain write uses too."""
    return properties.get("write.parquet.compression-codec", "zstd")


def translation(b: EmbeddedBroker, values: list[bytes], scratch: Path,
                mode: str = "value_schema_id_prefix") -> tuple[float, ...]:
    """(translation records/s, plain Parquet write records/s) of one flush of ``values``
    into the table of a topic translated before (its first flush, of a few records, has
    created the table: once in a topic's life, not part of translating), then the same two
    per CPU second of this process (what a machine shared with other work hides least), then
    the same two per CPU second of their own threads only (the flush's thread, its
    translator's ``cpu_s``; the plain write's: the broker's other threads left out)."""
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
    t0, c0, w0 = time.perf_counter(), time.process_time(), time.thread_time()
    pq.write_table(rows, scratch / f"{topic}.parquet", compression=codec(table.properties))
    plain, plain_cpu = time.perf_counter() - t0, time.process_time() - c0
    plain_thread = time.thread_time() - w0
    n = len(values)
    return (n / translate, n / plain, n / translate_cpu, n / plain_cpu, n / translate_thread,
            n / plain_thread, broker_cpu * 1000)


def drain(b: EmbeddedBroker, timeout: float = 600) -> None:
    """Wait until the translation thread has caught up with every topic (the produce phase
    leaves Iceberg topics behind it)."""
    assert b.iceberg is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lags = b.iceberg.lag()
        if all(sum(per.values()) == 0 for per in lags.values()):
            return
        time.sleep(0.5)


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


def warm_up(b: EmbeddedBroker, values: list[bytes]) -> None:
    """One flush of an Iceberg topic before the timed runs (when the translation phase was
    skipped, the first flush of the bench's life would import and start pyiceberg, Polars
    and pyarrow's pools inside the first timed run)."""
    assert b.iceberg is not None
    topic = f"w-{uuid.uuid4().hex[:6]}"
    create(b.bootstrap_servers, topic, 6, True, 3_600_000)
    deadline = time.monotonic() + 30
    while topic not in b.iceberg.topics and time.monotonic() < deadline:
        time.sleep(0.05)
    produce(b.bootstrap_servers, topic, values)
    b.run(b.iceberg.flush_topic(topic), timeout=600)


def produce_phase(b: EmbeddedBroker, values: list[bytes], repeats: int,
                  producers: Producers) -> None:
    """Iceberg topic and plain topic in turn (the Iceberg topic first in even repeats, the
    plain one in odd ones: a load that rises or falls over the pairs weighs on both sides
    alike); after an Iceberg topic's run its translator catches up before the next run
    starts (its backlog's flushes would otherwise compete with a plain run). Also, per run, the CPU seconds of the process and of the broker's
    event loop thread (in us per record), and of an Iceberg run the translation thread's CPU
    seconds during the run (its own clock), the flushes that ended in it, the records not yet
    in the table when the run ended and how long the translator took to catch up."""
    assert b.iceberg is not None and b._thread is not None and b._thread.ident is not None
    loop_clock = time.pthread_getcpuclockid(b._thread.ident)
    lateness: dict[bool, LatencyHistogram] = {True: LatencyHistogram(),
                                              False: LatencyHistogram()}
    ice, plain = [], []
    cpu: dict[bool, list[float]] = {True: [], False: []}
    loop_cpu: dict[bool, list[float]] = {True: [], False: []}
    flush_cpu, flushes, behind, caught_up = [], [], [], []
    warm_up(b, values[:600])
    translation_clock = TranslationClock(b)
    for repeat in range(repeats):
        pair = ((True, ice), (False, plain))
        for iceberg, out in pair if repeat % 2 == 0 else pair[::-1]:  # ABBA: no order bias
            topic = f"p-{uuid.uuid4().hex[:6]}"
            create(b.bootstrap_servers, topic, 6, iceberg, 1000)
            c0, l0 = time.process_time(), time.clock_gettime(loop_clock)
            t0 = translation_clock.seconds()
            late0 = list(LOOP_LAG.counts)
            out.append(producers.produce(b.bootstrap_servers, topic, values))
            for k, (n1, n0) in enumerate(zip(LOOP_LAG.counts, late0, strict=True)):
                lateness[iceberg].counts[k] += n1 - n0
            cpu[iceberg].append(time.process_time() - c0)
            loop_cpu[iceberg].append((time.clock_gettime(loop_clock) - l0) / len(values) * 1e6)
            if iceberg:
                flush_cpu.append(translation_clock.seconds() - t0)
                state = b.iceberg.topics.get(topic)
                flushes.append(state.translator.flushes if state else 0)
                done = state.translator.committed if state else {}
                behind.append(len(values) - sum(done.values()))
                d0 = time.monotonic()
                drain(b)
                caught_up.append(time.monotonic() - d0)
    print(f"produce iceberg topic records/s {rng_range(ice)}")
    print(f"produce plain topic   records/s {rng_range(plain)}")
    print(f"iceberg / plain produce: {ratio_range([a / c for a, c in zip(ice, plain, strict=True)])}")
    print(f"process CPU s per run: iceberg topic {fmt_s(cpu[True])}, plain topic "
          f"{fmt_s(cpu[False])}; of an iceberg run, the translation thread "
          f"{fmt_s(flush_cpu)} CPU, {rng_range(flushes)} flushes ended; records not in the "
          f"table at its end {rng_range(behind)}, in it {fmt_s(caught_up)} s later")
    print(f"nice value of the translation {translation_clock.nice()}, of "
          f"the event loop's {thread_nice(b._thread.name)}")
    print(f"event loop thread CPU us per record: iceberg topic {fmt_s(loop_cpu[True])}, "
          f"plain topic {fmt_s(loop_cpu[False])}")
    print("event loop lateness (its lag probe, all runs) ms p50 / p99 / p99.9: " + "; ".join(
        f"{name} {h.quantile_ms(0.5):.1f} / {h.quantile_ms(0.99):.1f} / "
        f"{h.quantile_ms(0.999):.1f}" for name, h in (("iceberg topic", lateness[True]),
                                                       ("plain topic", lateness[False]))))


class TranslationClock:
    """CPU seconds and nice value of the translation: its thread, or its worker process."""

    def __init__(self, b: EmbeddedBroker) -> None:
        assert b.iceberg is not None
        self.worker = b.iceberg.worker
        self.clock = None if self.worker is not None else thread_clock("iceberg-translation")

    def _stat(self) -> list[str]:
        assert self.worker is not None
        stat = Path(f"/proc/{self.worker.pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()

    def seconds(self) -> float:
        if self.clock is not None:
            return time.clock_gettime(self.clock)
        fields = self._stat()  # utime and stime, in clock ticks
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def nice(self) -> str:
        if self.clock is not None:
            return f"thread {thread_nice('iceberg-translation')}"
        return f"worker process {self._stat()[16]}"


def thread_clock(prefix: str) -> int:
    """The CPU clock of this process's (first) thread named ``prefix``...."""
    for t in threading.enumerate():
        if t.name.startswith(prefix) and t.ident is not None:
            return time.pthread_getcpuclockid(t.ident)
    raise LookupError(prefix)


def thread_nice(prefix: str) -> str:
    """The nice value of this process's threads named ``prefix``... (Linux: from
    /proc/self/task/TID/stat, its 19th field), or ``-`` where there are none."""
    out = []
    for t in threading.enumerate():
        if t.name.startswith(prefix) and t.native_id is not None:
            stat = Path(f"/proc/self/task/{t.native_id}/stat").read_text()
            out.append(stat[stat.rindex(")") + 2:].split()[16])
    return ",".join(out) or "-"


def fmt_s(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f} .. {max(xs):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
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
    with EmbeddedBroker(props) as b:
        values = serialize(b.schema_registry_url, "x", args.records)
        for name in [] if "translation" in args.skip else args.modes.split(","):
            mode = "key_value" if name == "key_value" else "value_schema_id_prefix"
            serializers = {"json": serialize_json, "protobuf": serialize_protobuf}
            data = serializers[name](b.schema_registry_url, name, args.records) if (
                name in serializers) else values
            tr, pl, tr_cpu, pl_cpu, tr_thread, pl_thread, own = [], [], [], [], [], [], []
            for _ in range(args.repeats):
                t, p, tc, pc_, tt, pt, ms = translation(b, data, scratch, mode)
                own.append(ms)
                tr.append(t)
                pl.append(p)
                tr_cpu.append(tc)
                pl_cpu.append(pc_)
                tr_thread.append(tt)
                pl_thread.append(pt)
            print(f"[{name}] translation     records/s {rng_range(tr)}")
            print(f"[{name}] parquet write   records/s {rng_range(pl)}")
            print(f"[{name}] translation / parquet write: "
                  f"{ratio_range([a / c for a, c in zip(tr, pl, strict=True)])}")
            print(f"[{name}] per CPU second: translation {rng_range(tr_cpu)}, parquet write "
                  f"{rng_range(pl_cpu)}, ratio "
                  f"{ratio_range([a / c for a, c in zip(tr_cpu, pl_cpu, strict=True)])}")
            print(f"[{name}] per CPU second of their threads: translation "
                  f"{rng_range(tr_thread)}, parquet write {rng_range(pl_thread)}, ratio "
                  f"{ratio_range([a / c for a, c in zip(tr_thread, pl_thread, strict=True)])}")
            print(f"[{name}] CPU ms of the broker's process in the flush (with a worker "
                  f"process: the log side only) {rng_range(own)}")
        if "produce" not in args.skip:
            n = args.produce_records or 20 * args.records
            produce_phase(b, (values * (n // len(values) + 1))[:n], args.repeats, producers)
        if "lag" in args.skip:
            return
        n = int(args.rate * args.lag_seconds)
        lags = lag(b, (values * (n // len(values) + 1))[:n], args.rate, args.target_lag_ms,
                   producers)
        q = statistics.quantiles(lags, n=100)
        print(f"lag at {args.rate:,.0f} records/s for {args.lag_seconds:.0f} s, target "
              f"{args.target_lag_ms} ms: p50 {q[49]:,.0f} ms, p99 {q[98]:,.0f} ms, "
              f"max {max(lags):,.0f} ms")


if __name__ == "__main__":
    main()
