"""Every event-loop stall over a threshold while a broker serves a steady produce load, with
what ran, next to the produce->ack latency the load saw.

The broker runs in this process (tidelog.testing.EmbeddedBroker, its own loop thread, uvloop
when installed) watched by tidelog.metrics.loop_lag's StallWatchdog (pings the loop, samples
its thread's stack while a ping waits) and StallRecorder (garbage collections; loop callbacks
too on asyncio's own loop): every stall longer than --threshold-ms is kept with what ran and
split three ways: the loop's thread working, runnable but waiting for a core (the kernel's
run-queue delay: other processes had the CPUs), or neither (the GIL, a blocking call). The
load is a librdkafka producer in a child process (idempotent, acks=all, linger.ms=0) at
--rate records/s of 100 B for --seconds after --warmup seconds; it reports produce->ack
latency (librdkafka's per-message latency) percentiles over the measured part only.

    .venv/bin/python bench/loop_stalls.py [--rate 5000] [--seconds 60] [--warmup 10]
                                          [--partitions 1] [--threshold-ms 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from tidelog.metrics.loop_lag import LOOP_LAG, StallRecorder, StallWatchdog, classify, summarize
from tidelog.testing import EmbeddedBroker

LOAD = r"""
import json, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds, warmup = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lat, failed = [], [0]
measuring = [False]
def dr(err, msg):
    if err is not None:
        failed[0] += 1
    elif measuring[0]:
        lat.append(msg.latency())
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 0, "on_delivery": dr})
value = b"v" * 100
start = time.monotonic()
end = start + warmup + seconds
i = 0
while True:
    now = time.monotonic()
    if now >= end:
        break
    measuring[0] = now >= start + warmup
    p.produce(topic, value, str(i).encode())
    i += 1
    p.poll(0)
    if (ahead := start + i / rate - time.monotonic()) > 0:
        time.sleep(ahead)  # poll(t) waits whole ms: under 1 ms it spins
p.flush(60)
lat.sort()
def q(x):
    return lat[min(len(lat) - 1, int(x * len(lat)))] * 1000 if lat else 0.0
print(json.dumps({"n": len(lat), "failed": failed[0], "p50": q(0.5), "p99": q(0.99),
                  "p999": q(0.999), "max": lat[-1] * 1000 if lat else 0.0}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--threshold-ms", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    with (EmbeddedBroker({"num.partitions": str(args.partitions)}) as broker,
          StallRecorder(threshold_ms=args.threshold_ms) as rec,
          StallWatchdog(broker._loop, broker._thread.ident, args.threshold_ms,
                        broker._thread.native_id or 0) as dog):
        out = subprocess.run(
            [sys.executable, "-c", LOAD, broker.bootstrap_servers, "stalls", str(args.rate),
             str(args.seconds), str(args.warmup)],
            capture_output=True, text=True, check=True)
        took = time.perf_counter_ns()
    load = json.loads(out.stdout.strip().splitlines()[-1])
    span_s = (args.seconds + args.warmup)
    print(f"{args.rate:,.0f} records/s of 100 B, idempotent acks=all linger 0, "
          f"{args.partitions} partition(s), {args.seconds:.0f} s after {args.warmup:.0f} s warm-up")
    print(f"  produce->ack: p50 {load['p50']:.2f} ms  p99 {load['p99']:.2f} ms  "
          f"p99.9 {load['p999']:.2f} ms  max {load['max']:.2f} ms  ({load['n']:,} records, "
          f"{load['failed']} failed)")
    print("  loop lag (10 ms timer, whole run): " + "  ".join(
        f"p{float(q) * 100:g} {v:.2f} ms" for q, v in LOOP_LAG.quantiles()))
    stalls = [s for s in rec.stalls + dog.stalls if s.started_ns <= took]
    busy, queued, waiting = classify(stalls)
    for label, group in (("the loop's thread working (>= 50% CPU)", busy),
                         ("the loop's thread runnable, waiting for a core (>= 50%)", queued),
                         ("the loop's thread waiting for the GIL or a system call", waiting)):
        print(f"  stalls over {args.threshold_ms:g} ms, {label}: {len(group)} in {span_s:.0f} s "
              f"({sum(s.duration_ns for s in group) / 1e6:.0f} ms in all); by what ran:")
        for what, count, total_ms, max_ms in summarize(group)[: args.top]:
            print(f"    {count:6d}x  total {total_ms:8.1f} ms  max {max_ms:7.2f} ms  {what}")


if __name__ == "__main__":
    main()
