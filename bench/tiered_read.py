"""Tiered storage read and produce paths, each against its baseline in the same run.

One ``tidelog serve`` tiers to a bucket on a real S3 server (SeaweedFS's ``weed mini`` on
127.0.0.1). Each repeat creates two single-partition topics on it: ``local-<i>`` (plain)
and ``tiered-<i>`` (``remote.storage.enable``, ``local.retention.bytes=1``: once copied,
every closed segment leaves the disk), then, alternating which goes first:

- produce: ``--records`` records of ``--size`` bytes into each, by librdkafka with no
  Python in its per-record path (bench/rdkafka_load.py), acks=1: records/s with tiering
  on (the topic being copied meanwhile) vs off. Goal: on >= 0.9x off.
- consume: once the tiered topic's local log start (ListOffsets EARLIEST_LOCAL) is past
  most of it, a confluent-kafka consumer reads each topic from offset 0 to its end:
  records/s of tiered data (Fetch answered from S3) vs the same data on local disk.
  Goal: tiered >= 0.5x local.

- remote read latency with and without the RemoteIndexCache: two more brokers on the same
  S3 server, one with the default ``remote.log.index.file.cache.total.size.bytes`` (1 GiB:
  every index stays), one with 1 byte (nothing fits: each remote read GETs the segment's
  offset, time and transaction indexes again), each with a tiered topic of the same
  ``--latency-records`` records; per repeat ``--latency-reads`` single-partition Fetches
  (64 KiB) at the same seeded random offsets below the local start, one at a time, timed
  from request to records on each broker (the order alternating). Per repeat the median
  latency of each and their ratio (without / with).

Printed: per repeat the rates and ratios, then median (min - max) over the repeats, and
the machine's load (``uptime``) before and after.

    .venv/bin/python bench/tiered_read.py [--records 50000] [--size 1024] [--repeats 3]
        [--latency-records 30000] [--latency-reads 200] [--only-latency]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import consume, tidelog_broker
from rdkafka_load import Producer

from tidelog.client.conn import TopicPartition
from tidelog.client.kafka_client import KafkaClient
from tidelog.testing.seaweedfs import SeaweedFS

SEGMENT_BYTES = 8 << 20
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.initial.task.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
    "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
}


def create(bootstrap: str, name: str, tiered: bool) -> None:
    configs = {"segment.bytes": str(SEGMENT_BYTES), "retention.ms": "-1"}
    if tiered:
        configs |= {"remote.storage.enable": "true", "local.retention.bytes": "1"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(60)


def produce_rate(bootstrap: str, topic: str, n: int, size: int) -> float:
    producer = Producer(bootstrap, topic, config={"acks": "1", "linger.ms": "5"})
    try:
        producer.produce(b"w" * size, 1)  # connection and metadata outside the clock
        return n / producer.produce(bytes(range(256)) * (size // 256) + b"v" * (size % 256), n)
    finally:
        producer.close()


def wait_tiered(bootstrap: str, topic: str, n: int, size: int, timeout: float = 600) -> int:
    """Wait until local retention has moved the local log start into the last closed or
    the active segment (every segment below it copied to S3, ListOffsets LATEST_TIERED):
    returns the local start."""
    tp = TopicPartition(topic, 0)
    per_segment = SEGMENT_BYTES // (size + 70)  # a record's overhead in a batch: < 70 B
    deadline = time.monotonic() + timeout
    with KafkaClient(bootstrap) as client:
        while True:
            local = client.list_offsets({tp: -4})[tp][0]
            tiered = client.list_offsets({tp: -5})[tp][0]
            if local > 0 and local >= n - 2 * per_segment and tiered >= local - 1:
                return int(local)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: local start {local}, tiered {tiered} of {n}")
            time.sleep(0.2)  # polling a foreign process's progress, not a timing wait


READ_BYTES = 64 << 10
NO_INDEX_CACHE = {"remote.log.index.file.cache.total.size.bytes": "1"}


def read_latencies(bootstrap: str, topic: str, offsets: list[int]) -> list[float]:
    """Seconds from each Fetch at ``offsets[i]`` to its first records (a remote read the
    broker did not finish within remote.fetch.max.wait.ms is asked again, on the clock)."""
    tp = TopicPartition(topic, 0)
    out = []
    with KafkaClient(bootstrap) as client:
        client.list_offsets({tp: -1})  # connection and metadata outside the clock
        for offset in offsets:
            t0 = time.perf_counter()
            while True:
                got = client.fetch({tp: offset}, max_wait_ms=500,
                                   partition_max_bytes=READ_BYTES)[tp]
                if got.error != 0:
                    raise RuntimeError(f"Fetch {tp} at {offset}: error {got.error}")
                if got.records:
                    break
            out.append(time.perf_counter() - t0)
    return out


def index_cache_latency(s3: SeaweedFS, args: argparse.Namespace,
                        rows: dict[str, list[float]]) -> None:
    """Remote read latency with the RemoteIndexCache and without (see the module doc)."""
    n, size = args.latency_records, args.size
    brokers = {}
    with contextlib.ExitStack() as stack:
        for kind, extra in (("cached", {}), ("uncached", NO_INDEX_CACHE)):
            bucket = s3.create_bucket(f"index-cache-{kind}")
            boot, _pid = stack.enter_context(tidelog_broker(
                overrides={**TIERED_BROKER, **bucket.rsm_configs, **extra}))
            create(boot, "lat", tiered=True)
            produce_rate(boot, "lat", n, size)
            brokers[kind] = (boot, wait_tiered(boot, "lat", n, size))
        below = min(start for _boot, start in brokers.values())
        rng = random.Random(args.seed)
        print(f"remote read latency: {n} records, reads below offset {below}, seed {args.seed}")
        for i in range(args.repeats):
            offsets = [rng.randrange(below) for _ in range(args.latency_reads)]
            kinds = ["cached", "uncached"] if i % 2 == 0 else ["uncached", "cached"]
            median = {k: statistics.median(read_latencies(brokers[k][0], "lat", offsets))
                      for k in kinds}
            rows["read ms cached"].append(median["cached"] * 1000)
            rows["read ms uncached"].append(median["uncached"] * 1000)
            rows["read ratio"].append(median["uncached"] / median["cached"])
            print(f"repeat {i + 1}: median remote read {median['cached'] * 1000:.2f} ms with "
                  f"the index cache, {median['uncached'] * 1000:.2f} ms without")


def span(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} - {max(values):{fmt}})"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-records", type=int, default=30_000)
    ap.add_argument("--latency-reads", type=int, default=200)
    ap.add_argument("--only-latency", action="store_true",
                    help="only the remote read latency with and without the index cache")
    ap.add_argument("--seed", type=int, default=405)
    args = ap.parse_args()
    n, size = args.records, args.size
    if n * size < 2 * SEGMENT_BYTES:
        ap.error(f"--records x --size must fill at least two {SEGMENT_BYTES}-byte segments")
    print(f"load before: {uptime()}")
    if not args.only_latency:
        print(f"{n} records of {size} B per topic, segment.bytes {SEGMENT_BYTES}, "
              f"librdkafka {ck.libversion()[0]}")
    rows: dict[str, list[float]] = {k: [] for k in (
        "produce off", "produce on", "produce ratio", "consume local", "consume tiered",
        "consume ratio", "read ms cached", "read ms uncached", "read ratio")}
    with SeaweedFS() as s3:
        if not args.only_latency:
            run_rates(s3, args, rows)
        index_cache_latency(s3, args, rows)
    for k, values in rows.items():
        if not values:
            continue
        unit = "x" if k.endswith("ratio") else " ms" if " ms " in f" {k} " else " records/s"
        print(f"{k:16} {span(values, ',.0f' if unit == ' records/s' else '.2f')}{unit}")
    print(f"load after: {uptime()}")


def run_rates(s3: SeaweedFS, args: argparse.Namespace, rows: dict[str, list[float]]) -> None:
    """The produce and consume rates, tiering on vs off (see the module doc)."""
    n, size = args.records, args.size
    bucket = s3.create_bucket("tiered-bench")
    with tidelog_broker(overrides={**TIERED_BROKER, **bucket.rsm_configs}) as (boot, _pid):
        for i in range(args.repeats):
            local, tiered = f"local-{i}", f"tiered-{i}"
            create(boot, local, tiered=False)
            create(boot, tiered, tiered=True)
            order = [(local, "off"), (tiered, "on")]
            rates = dict((kind, produce_rate(boot, t, n, size))
                         for t, kind in (order if i % 2 == 0 else order[::-1]))
            local_start = wait_tiered(boot, tiered, n, size)
            reads = [(local, "local"), (tiered, "tiered")]
            for t, kind in (reads if i % 2 == 0 else reads[::-1]):
                rates[kind] = n / consume(boot, t, n)
            for k, v in (("produce off", rates["off"]), ("produce on", rates["on"]),
                         ("produce ratio", rates["on"] / rates["off"]),
                         ("consume local", rates["local"]),
                         ("consume tiered", rates["tiered"]),
                         ("consume ratio", rates["tiered"] / rates["local"])):
                rows[k].append(v)
            print(f"repeat {i + 1}: produce off {rates['off']:,.0f} on {rates['on']:,.0f} "
                  f"records/s; consume local {rates['local']:,.0f} tiered "
                  f"{rates['tiered']:,.0f} records/s ({local_start} of {n} records "
                  "read from S3)")


if __name__ == "__main__":
    main()
