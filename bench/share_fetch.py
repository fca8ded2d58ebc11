"""Share consumers of one partition, the shape of librdkafka's 0174 test: one producer that
flushes every record (acks=all, idempotent) and ``--consumers`` confluent-kafka
ShareConsumers, each in its thread, against ``tidelog serve`` (one broker). Alternating in each
run: this tree and, with ``--baseline-src``, another tree's ``src`` (e.g. main exported with
``git archive``).

Printed per tree, median [min .. max] over the runs: records/s consumed (first produce to
last record), the broker's CPU seconds per 1,000 records (utime+stime of its process), the
produce-to-consume latency p50 and p99 (ms, from each record's create time), and the
broker's CPU share (% of a core) while the consumers poll an idle partition; with a
baseline, each figure's ratio to it (paired by run), and the load average before and after.

    python bench/share_fetch.py [--runs 3] [--records 2000] [--consumers 8] [--idle 5]
                                [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import tidelog_broker

SRC = str(Path(__file__).resolve().parents[1] / "src")
TOPIC, GROUP = "queue", "sg-bench"
Figures = dict[str, float]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prepare(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    earliest = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([earliest]).values():
        f.result(30)


class Consumers:
    """``n`` ShareConsumers polling in their threads; each record's receive latency."""

    def __init__(self, bootstrap: str, n: int) -> None:
        self.latencies: list[float] = []
        self.lock = threading.Lock()
        self.running = True
        self.threads = [threading.Thread(target=self._run, args=(bootstrap,)) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self, bootstrap: str) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
        c.subscribe([TOPIC])
        while self.running:
            got = [m for m in c.poll(0.5) if m.error() is None]
            now = time.time() * 1000
            with self.lock:
                self.latencies += [now - m.timestamp()[1] for m in got]
        c.close()

    def count(self) -> int:
        with self.lock:
            return len(self.latencies)

    def stop(self) -> None:
        self.running = False
        for t in self.threads:
            t.join(60)


def one_run(src: str, records: int, consumers: int, idle_s: float) -> Figures:
    with tidelog_broker(env={"PYTHONPATH": src}) as (bootstrap, pid):
        prepare(bootstrap)
        group = Consumers(bootstrap, consumers)
        try:
            p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
            p.produce(TOPIC, b"warm-up", partition=0)
            p.flush(30)
            deadline = time.monotonic() + 60
            while group.count() < 1 and time.monotonic() < deadline:
                time.sleep(0.05)  # until the consumers hold the share-partition
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            for i in range(records):
                p.produce(TOPIC, str(i).encode(), partition=0)
                p.flush(30)
            deadline = time.monotonic() + 120
            while group.count() < records + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
            lat = sorted(group.latencies[1:])
            cpu_idle0 = cpu_seconds(pid)
            time.sleep(idle_s)  # the consumers keep polling an idle partition
            idle = (cpu_seconds(pid) - cpu_idle0) / idle_s * 100
        finally:
            group.stop()
    if len(lat) < records:
        raise RuntimeError(f"{len(lat)} of {records} records consumed")
    return {"records/s": records / elapsed, "cpu s/1k": cpu / records * 1000,
            "p50 ms": lat[len(lat) // 2], "p99 ms": lat[int(len(lat) * 0.99)],
            "idle cpu %": idle}


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} [{min(values):,.2f} .. {max(values):,.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--consumers", type=int, default=8)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--baseline-src", default=None)
    args = ap.parse_args()
    trees = {"this tree": SRC}
    if args.baseline_src:
        trees["baseline"] = args.baseline_src
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    results: dict[str, list[Figures]] = {name: [] for name in trees}
    for run in range(args.runs):
        for name, src in trees.items():
            results[name].append(one_run(src, args.records, args.consumers, args.idle))
            print(f"run {run + 1} {name}: " + ", ".join(
                f"{k} {v:,.2f}" for k, v in results[name][-1].items()), flush=True)
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")
    print(f"{args.consumers} share consumers, {args.records} records flushed one by one, "
          f"{args.runs} runs")
    for key in results["this tree"][0]:
        line = f"{key:>11}: " + "; ".join(
            f"{name} {fmt([r[key] for r in rs])}" for name, rs in results.items())
        if "baseline" in results:
            ratios = [a[key] / b[key] for a, b in zip(results["this tree"], results["baseline"],
                                                      strict=True) if b[key]]
            if ratios:
                line += f"; ratio {fmt(ratios)}"
        print(line)


if __name__ == "__main__":
    main()
