"""What a LeaderAndIsr that makes N new partitions costs every other client of the broker.

A broker (tidelog.testing.EmbeddedBroker, its own loop thread, watched by
tidelog.metrics.loop_lag's StallWatchdog) serves a librdkafka producer (a child process,
idempotent, acks=all, linger.ms=0, --rate records/s of 100 B) on one topic; after a warm-up
the bench sends, as a controller does, one LeaderAndIsr making this broker the leader of the
N partitions of a new topic, and reports for the time until it is answered: that time, the
loop's longest stall (a watchdog ping answered late), and the producer's produce->ack p99 and
max over the records sent meanwhile. Each tree runs in its own process, trees alternated in
the same sitting, --rounds times; ranges over rounds, and the load average.

    .venv/bin/python bench/leader_and_isr.py --trees /path/to/tree,/path/to/main \
        [--partitions 4,100,1000] [--rounds 3] [--rate 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

LOAD = r"""
import json, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
sent = []
def dr(err, msg, t=None):
    pass
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 0})
value = b"v" * 100
start = time.monotonic()
i = 0
out = []
while True:
    now = time.monotonic()
    if now >= start + seconds:
        break
    t = time.monotonic_ns()
    p.produce(topic, value, on_delivery=lambda err, msg, t=t: out.append(
        (t, time.monotonic_ns() - t, err is not None)))
    i += 1
    p.poll(0)
    if (ahead := start + i / rate - time.monotonic()) > 0:
        time.sleep(ahead)
p.flush(60)
print(json.dumps(out))
"""


def leader_and_isr(node: int, topic: str, topic_id: uuid.UUID, n: int) -> dict[str, Any]:
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": node, "leader_epoch": 0,
              "isr": [node], "partition_epoch": 0, "replicas": [node], "is_new": True}
             for p in range(n)]  # fmt: skip
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": topic_id,
                              "partition_states": parts}], "live_leaders": []}  # fmt: skip


def one(n: int, rate: float, warmup: float, after: float) -> dict[str, Any]:
    from tidelog.client.conn import BrokerConnection
    from tidelog.metrics.loop_lag import StallWatchdog
    from tidelog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="lai-bench-") as d, \
            EmbeddedBroker(log_dir=d) as b:  # fmt: skip
        conn = BrokerConnection("127.0.0.1", b.port, client_id="controller", timeout_s=120)
        conn.call(3, 12, {"topics": [{"name": "load"}], "allow_auto_topic_creation": True})
        load = subprocess.Popen([sys.executable, "-c", LOAD, b.bootstrap_servers, "load",
                                 str(rate), str(warmup + after)],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(warmup)
        loop, thread = b._loop, b._thread
        assert loop is not None and thread is not None and thread.ident is not None
        with StallWatchdog(loop, thread.ident, 2.0, thread.native_id or 0) as dog:
            t0 = time.monotonic_ns()
            resp = conn.call(4, 7, leader_and_isr(b.broker.node_id, "big", uuid.uuid4(), n))
            t1 = time.monotonic_ns()
            time.sleep(0.2)
        errors = [int(p.error_code) for t in resp.topics for p in t.partition_errors]
        assert errors == [0] * n, errors
        out, _ = load.communicate(timeout=120)
        conn.close()
    acks = sorted(lat for t, lat, failed in json.loads(out) if t0 <= t <= t1 and not failed)
    stalls = [s.duration_ns for s in dog.stalls if s.started_ns <= t1 and
              s.started_ns + s.duration_ns >= t0]  # fmt: skip

    def q(x: float) -> float:
        return acks[min(len(acks) - 1, int(x * len(acks)))] / 1e6 if acks else 0.0

    return {"n": n, "lai_ms": (t1 - t0) / 1e6, "stall_max_ms": max(stalls, default=0) / 1e6,
            "stalls": len(stalls), "acks": len(acks), "ack_p99_ms": q(0.99),
            "ack_max_ms": acks[-1] / 1e6 if acks else 0.0}  # fmt: skip


def span(values: list[float]) -> str:
    return f"{min(values):8.1f}-{max(values):<8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--partitions", default="4,100,1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--after", type=float, default=6.0, help="seconds of load after warm-up")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(one(args.one, args.rate, args.warmup, args.after)))
        return
    trees = args.trees.split(",")
    sizes = [int(x) for x in args.partitions.split(",")]
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for n in sizes:
            for tree in trees:
                env = {**os.environ, "PYTHONPATH": str(Path(tree) / "src")}
                out = subprocess.run(
                    [sys.executable, __file__, "--one", str(n), "--rate", str(args.rate),
                     "--warmup", str(args.warmup), "--after", str(args.after)],
                    env=env, capture_output=True, text=True, check=True)  # fmt: skip
                runs.setdefault((tree, n), []).append(json.loads(out.stdout.splitlines()[-1]))
                loads.append(os.getloadavg()[0])
    print(f"LeaderAndIsr making N partitions, producer {args.rate:,.0f} rec/s acks=all on "
          f"another topic; {args.rounds} rounds, ranges; load average "
          f"{min(loads):.1f}-{max(loads):.1f} (1 min)")
    print(f"{'tree':<28} {'N':>5}  {'LAI answered ms':>17}  {'loop stall max ms':>17}  "
          f"{'ack p99 ms':>17}  {'ack max ms':>17}")
    for n in sizes:
        for tree in trees:
            rs = runs[(tree, n)]
            print(f"{tree[-28:]:<28} {n:>5}  {span([r['lai_ms'] for r in rs])}  "
                  f"{span([r['stall_max_ms'] for r in rs])}  "
                  f"{span([r['ack_p99_ms'] for r in rs])}  {span([r['ack_max_ms'] for r in rs])}")
        base = runs[(trees[-1], n)]
        for tree in trees[:-1]:
            mine = runs[(tree, n)]
            ratio = (sorted(r["stall_max_ms"] for r in mine)[len(mine) // 2]
                     / max(1e-9, sorted(r["stall_max_ms"] for r in base)[len(base) // 2]))
            print(f"  N={n}: median loop stall max, {Path(tree).name} / {Path(trees[-1]).name}"
                  f" = {ratio:.2f}")


if __name__ == "__main__":
    main()
