"""Produce->ack and produce->consume latency percentiles at a steady rate: tidelog (writer
thread and on the loop) and Tansu in the same run, alternating.

Per scenario (records/s, partitions) and broker: a fresh broker in a child process, the topic
created with that many partitions, then two child processes: a librdkafka consumer assigned
every partition, and a librdkafka producer (confluent-kafka; idempotent, acks=all,
linger.ms=0, 100 B values spread over the partitions) at the rate, paced, for --warmup then
--seconds. The producer keeps librdkafka's own per-record latency (produce() to the
acknowledgement) of the measured part; each value carries its send time (CLOCK_MONOTONIC,
shared by the processes), the consumer the time it got it. Printed: p50/p99/p99.9/max of
each, median [min .. max] over --runs, and the load average.

    .venv/bin/python bench/tail_latency.py [--runs 3] [--seconds 60] [--warmup 10]
        [--scenarios 5000x1,20000x1,5000x1000] [--brokers writer,loop,tansu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
from confluent_kafka.admin import AdminClient, NewTopic

import native

PRODUCE = r"""
import json, struct, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds, warmup, parts = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
lat, failed, measuring = [], [0], [False]
def dr(err, msg):
    if err is not None:
        failed[0] += 1
    elif measuring[0]:
        lat.append(msg.latency())
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 0, "on_delivery": dr})
pad = b"v" * 91
start = time.monotonic()
end = start + warmup + seconds
i = 0
while True:
    now = time.monotonic()
    if now >= end:
        break
    measuring[0] = now >= start + warmup
    p.produce(topic, struct.pack(">?q", measuring[0], time.monotonic_ns()) + pad,
              partition=i % parts)
    i += 1
    due = start + i / rate
    while (ahead := due - time.monotonic()) > 0:
        p.poll(ahead)
    p.poll(0)
p.flush(60)
print(json.dumps({"lat": [x * 1000 for x in lat], "failed": failed[0], "sent": i}))
"""

CONSUME = r"""
import json, struct, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, parts, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tail", "enable.auto.commit": False,
              "fetch.wait.max.ms": 100})
c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
print("ready", flush=True)
lat = []
end = time.monotonic() + total
while time.monotonic() < end:
    m = c.poll(0.1)  # consume(n, t) would hold each record until n or t: poll returns at once
    if m is not None and m.error() is None:
        now = time.monotonic_ns()
        measured, sent = struct.unpack_from(">?q", m.value())
        if measured:
            lat.append((now - sent) / 1e6)
c.close()
print(json.dumps({"lat": lat}))
"""

Factory = Callable[[], AbstractContextManager[tuple[str, int]]]


def brokers(names: list[str]) -> list[tuple[str, Factory]]:
    out: list[tuple[str, Factory]] = []
    for name in names:
        if name == "writer":
            out.append(("tidelog (writer thread)", lambda: broker_bench.tidelog_broker()))
        elif name == "loop":
            out.append(("tidelog (on the loop)", lambda: broker_bench.tidelog_broker(
                overrides={"tidelog.log.append.writer.enable": "false"})))
        elif name == "tansu":
            tansu = native.tansu_path()
            if tansu is not None:
                out.append(("tansu", lambda t=tansu: broker_bench.tansu_broker(t)))
    return out


def quantiles(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    if not lat:
        return {"p50": 0.0, "p99": 0.0, "p99.9": 0.0, "max": 0.0}

    def q(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))]

    return {"p50": q(0.5), "p99": q(0.99), "p99.9": q(0.999), "max": lat[-1]}


def one(bootstrap: str, rate: float, parts: int, seconds: float, warmup: float,
        consume: bool = True) -> tuple[dict[str, float], dict[str, float], int]:
    topic = f"tail-{time.monotonic_ns()}"
    _create(bootstrap, topic, parts)
    consumer = subprocess.Popen(
        [sys.executable, "-c", CONSUME if consume else "print('ready', flush=True)",
         bootstrap, topic, str(parts), str(seconds + warmup + 10)],
        stdout=subprocess.PIPE, text=True)
    assert consumer.stdout is not None
    consumer.stdout.readline()  # assigned
    produced = subprocess.run(
        [sys.executable, "-c", PRODUCE, bootstrap, topic, str(rate), str(seconds),
         str(warmup), str(parts)], capture_output=True, text=True)
    if produced.returncode != 0:
        consumer.kill()
        raise RuntimeError(f"the producer failed: {produced.stderr[-2000:]}")
    out, _ = consumer.communicate(timeout=seconds + warmup + 60)
    p = json.loads(produced.stdout.strip().splitlines()[-1])
    c = json.loads(out.strip().splitlines()[-1]) if consume else {"lat": []}
    return quantiles(p["lat"]), quantiles(c["lat"]), int(p["failed"])


def _create(bootstrap: str, topic: str, parts: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, parts, 1)]).values():
        f.result(60)


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--scenarios", default="5000x1,20000x1,5000x1000")
    ap.add_argument("--brokers", default="writer,loop,tansu")
    ap.add_argument("--no-consume", action="store_true",
                    help="produce->ack only (no consumer loading the broker)")
    args = ap.parse_args()
    chosen = brokers(args.brokers.split(","))
    scenarios = [tuple(int(x) for x in s.split("x")) for s in args.scenarios.split(",")]
    for rate, parts in scenarios:
        load0 = os.getloadavg()[0]
        got: dict[str, list[tuple[dict[str, float], dict[str, float], int]]] = {}
        for _ in range(args.runs):
            for name, factory in chosen:
                with factory() as (bootstrap, _pid):
                    got.setdefault(name, []).append(
                        one(bootstrap, rate, parts, args.seconds, args.warmup,
                            not args.no_consume))
        print(f"{rate:,} records/s of 100 B over {parts} partition(s), idempotent acks=all "
              f"linger 0, {args.seconds:.0f} s after {args.warmup:.0f} s warm-up, "
              f"{args.runs} runs; load average {load0:.2f} before, "
              f"{os.getloadavg()[0]:.2f} after; ms, median [min .. max]")
        for name, runs in got.items():
            failed = sum(f for _, _, f in runs)
            for label, idx in (("produce->ack", 0), ("produce->consume", 1)):
                cells = "  ".join(
                    f"{k} {fmt([r[idx][k] for r in runs])}"
                    for k in ("p50", "p99", "p99.9", "max"))
                print(f"  {name:<24} {label:<17} {cells}" + (
                    f"  ({failed} failed)" if failed and idx == 0 else ""))


if __name__ == "__main__":
    main()
