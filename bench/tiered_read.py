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

Printed: per repeat the rates and ratios, then median (min - max) over the repeats, and
the machine's load (``uptime``) before and after.

    .venv/bin/python bench/tiered_read.py [--records 50000] [--size 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
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


def span(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}} - {max(values):{fmt}})"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n, size = args.records, args.size
    if n * size < 2 * SEGMENT_BYTES:
        ap.error(f"--records x --size must fill at least two {SEGMENT_BYTES}-byte segments")
    print(f"load before: {uptime()}")
    print(f"{n} records of {size} B per topic, segment.bytes {SEGMENT_BYTES}, "
          f"librdkafka {ck.libversion()[0]}")
    rows: dict[str, list[float]] = {k: [] for k in (
        "produce off", "produce on", "produce ratio", "consume local", "consume tiered",
        "consume ratio")}
    with SeaweedFS() as s3:
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
    for k, values in rows.items():
        unit = "x" if k.endswith("ratio") else " records/s"
        print(f"{k:15} {span(values, '.2f' if unit == 'x' else ',.0f')}{unit}")
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
