"""What a LeaderAndIsr that makes N new partitions, or fails them over to this broker,
costs every other client of the broker.

A broker (tidelog.testing.EmbeddedBroker, its own loop thread, watched by
tidelog.metrics.loop_lag's StallWatchdog) serves a librdkafka producer (a child process,
idempotent, acks=all, linger.ms=0, --rate records/s of 100 B) on one topic; after a warm-up
the bench sends, as a controller does, requests about the N partitions of another topic and
reports for the time until each is answered: that time, the loop's longest stall (a watchdog
ping answered late), and the producer's produce->ack p99 and max over the records sent
meanwhile. The cases (--cases):

* ``new``: one LeaderAndIsr making this broker the leader of N new partitions, then a
  StopReplica deleting them;
* ``failover``: the N partitions made and led here at leader epoch 0 (not measured), then
  one LeaderAndIsr at leader epoch 1 (as after the controller moved them away and back, or a
  leader election naming this broker again): each new epoch's start goes to its
  ``leader-epoch-checkpoint`` (tmp, fsync, rename, dir fsync) before the answer.

* ``follow``: the N partitions made and led here at leader epoch 0 with another broker
  among their replicas (not measured), then one LeaderAndIsr naming that broker leader at
  epoch 1: this broker follows them (Kafka's makeFollowers: the fetchers start from each
  log end offset once the appends queued as leader are written);
* ``truncate`` (no broker, no load): what a follower's replica fetcher (on the event loop)
  spends truncating N logs it led at epoch 1 from their end with no record of it (the
  epoch's entry goes: Kafka's truncateTo at the log end offset), one after the other, as
  after a LeaderAndIsr making this broker follow their new leader.

Each tree runs in its own process, trees alternated in the same sitting, --rounds times;
ranges over rounds, and the load average.

    .venv/bin/python bench/leader_and_isr.py --trees /path/to/tree,/path/to/main \
        [--partitions 4,100,1000] [--rounds 3] [--rate 2000] [--cases new,failover]
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
import json, sys, threading, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
done = threading.Event()  # the bench closes our stdin: stop
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 0})
value = b"v" * 100
start = time.monotonic()
i = 0
out = []
while True:
    now = time.monotonic()
    if now >= start + seconds or done.is_set():
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


OTHER = 1_000  # a broker named as leader or replica, not running


def leader_and_isr(node: int, topic: str, topic_id: uuid.UUID, n: int,
                   epoch: int = 0, leader: int | None = None,
                   replicas: list[int] | None = None) -> dict[str, Any]:
    """Partitions 0..n-1 of ``topic`` led by ``leader`` (default ``node``) at ``epoch``."""
    leader = node if leader is None else leader
    replicas = [node] if replicas is None else replicas
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": leader,
              "leader_epoch": epoch, "isr": [leader], "partition_epoch": epoch,
              "replicas": replicas, "is_new": epoch == 0}
             for p in range(n)]  # fmt: skip
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": topic_id,
                              "partition_states": parts}], "live_leaders": []}  # fmt: skip


def stop_replica(node: int, topic: str, n: int) -> dict[str, Any]:
    parts = [{"partition_index": p, "leader_epoch": -2, "delete_partition": True}
             for p in range(n)]
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [{"topic_name": topic, "partition_states": parts}]}


def errors_of(resp: Any) -> list[int]:
    """The partition error codes of a LeaderAndIsr (topics) or StopReplica answer."""
    if hasattr(resp, "topics"):
        return [int(p.error_code) for t in resp.topics for p in t.partition_errors]
    return [int(p.error_code) for p in resp.partition_errors]


class CountedFetchers:
    """The fetcher manager in ``follow``: the fetches the LeaderAndIsr starts, counted."""

    def __init__(self) -> None:
        self.started = 0

    def add_fetcher_for_partitions(self, states: dict[Any, Any]) -> None:
        self.started += len(states)

    def remove_fetcher_for_partitions(self, tps: Any) -> None:
        return None


def one(n: int, rate: float, warmup: float, after: float, case: str) -> dict[str, Any]:
    from tidelog.client.conn import BrokerConnection
    from tidelog.metrics.loop_lag import StallWatchdog
    from tidelog.testing import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="lai-bench-") as d, \
            EmbeddedBroker(log_dir=d) as b:  # fmt: skip
        conn = BrokerConnection("127.0.0.1", b.port, client_id="controller", timeout_s=120)
        conn.call(3, 12, {"topics": [{"name": "load"}], "allow_auto_topic_creation": True})
        node, topic_id = b.broker.node_id, uuid.uuid4()
        # (requests, in order: (window name or None: not measured, api key, version, body))
        steps: list[tuple[str | None, int, int, dict[str, Any]]] = [
            ("lai", 4, 7, leader_and_isr(node, "big", topic_id, n)),
            ("stop", 5, 4, stop_replica(node, "big", n))]  # fmt: skip
        if case == "failover":
            steps = [(None, 4, 7, leader_and_isr(node, "big", topic_id, n)),
                     ("failover", 4, 7, leader_and_isr(node, "big", topic_id, n, epoch=1)),
                     (None, 5, 4, stop_replica(node, "big", n))]  # fmt: skip
        if case == "follow":  # (no broker OTHER: the fetchers it would start are counted)
            b.broker.replica_manager.fetcher_manager = fetchers = CountedFetchers()
            both = [node, OTHER]
            steps = [(None, 4, 7, leader_and_isr(node, "big", topic_id, n, replicas=both)),
                     ("follow", 4, 7, leader_and_isr(node, "big", topic_id, n, epoch=1,
                                                     leader=OTHER, replicas=both)),
                     (None, 5, 4, stop_replica(node, "big", n))]  # fmt: skip
        load = subprocess.Popen([sys.executable, "-c", LOAD, b.bootstrap_servers, "load",
                                 str(rate), str(warmup + after)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)  # fmt: skip
        time.sleep(warmup)
        loop, thread = b._loop, b._thread
        assert loop is not None and thread is not None and thread.ident is not None
        windows: dict[str, tuple[int, int]] = {}
        with StallWatchdog(loop, thread.ident, 2.0, thread.native_id or 0) as dog:
            for name, key, version, body in steps:
                t0 = time.monotonic_ns()
                resp = conn.call(key, version, body)
                t1 = time.monotonic_ns()
                assert errors_of(resp) == [0] * n, (name, errors_of(resp))
                if name is not None:
                    windows[name] = (t0, t1)
                time.sleep(0.5)
        out, _ = load.communicate("", timeout=300)  # (closes its stdin: it stops)
        conn.close()
    sent = json.loads(out)
    assert case != "follow" or fetchers.started == n, fetchers.started
    result: dict[str, Any] = {"n": n}
    for name, (t0, t1) in windows.items():
        result.update(window(name, t0, t1, sent, dog.stalls))
    return result


def truncations(n: int) -> dict[str, Any]:
    """``truncate``: the time of N follower truncations on the calling thread."""
    from tidelog.config.log_config import LogConfig
    from tidelog.storage.log import Log
    from tidelog.util.clock import SystemClock
    from tidelog.util.scheduler import KafkaScheduler

    scheduler = KafkaScheduler()  # (as the LogManager's: where a truncation's write may go)
    scheduler.startup()
    with tempfile.TemporaryDirectory(prefix="lai-bench-") as d:
        logs = [Log.open(Path(d) / f"big-{p}", LogConfig.from_props({}), clock=SystemClock(),
                         scheduler=scheduler)
                for p in range(n)]  # fmt: skip
        for lg in logs:
            lg.leader_epoch_cache.assign(1, 0)  # led at epoch 1 from offset 0, nothing since
        t0 = time.monotonic_ns()
        for lg in logs:
            lg.truncate_to(lg.log_end_offset)
        t1 = time.monotonic_ns()
        assert all(lg.leader_epoch_cache.entries == [] for lg in logs)
        for lg in logs:
            lg.leader_epoch_cache.flush()  # (written here, or by then elsewhere: done)
            lg.close()
    scheduler.shutdown()
    took = (t1 - t0) / 1e6
    return {"n": n, "truncate_ms": took, "truncate_stall_max_ms": took,
            "truncate_ack_p99_ms": 0.0, "truncate_ack_max_ms": 0.0}


def window(name: str, t0: int, t1: int, sent: list[tuple[int, int, bool]],
           stalls: list[Any]) -> dict[str, float]:
    """What happened while a request was in flight: its time, the loop's longest stall, and
    the acks of the records sent meanwhile."""
    acks = sorted(lat for t, lat, failed in sent if t0 <= t <= t1 and not failed)
    longest = max((s.duration_ns for s in stalls
                   if s.started_ns <= t1 and s.started_ns + s.duration_ns >= t0), default=0)

    def q(x: float) -> float:
        return acks[min(len(acks) - 1, int(x * len(acks)))] / 1e6 if acks else 0.0

    return {f"{name}_ms": (t1 - t0) / 1e6, f"{name}_stall_max_ms": longest / 1e6,
            f"{name}_ack_p99_ms": q(0.99), f"{name}_ack_max_ms": acks[-1] / 1e6 if acks else 0.0}


def span(values: list[float]) -> str:
    return f"{min(values):8.1f}-{max(values):<8.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trees", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--partitions", default="4,100,1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--after", type=float, default=300.0,
                    help="at most this many seconds of load after warm-up")
    ap.add_argument("--cases", default="new,failover",
                    help="new, failover, follow, truncate (see above)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--case", default="new", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one is not None and args.case == "truncate":
        print(json.dumps(truncations(args.one)))
        return
    if args.one is not None:
        print(json.dumps(one(args.one, args.rate, args.warmup, args.after, args.case)))
        return
    trees = args.trees.split(",")
    sizes = [int(x) for x in args.partitions.split(",")]
    cases = args.cases.split(",")
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for case in cases:
            for n in sizes:
                for tree in trees:
                    env = {**os.environ, "PYTHONPATH": str(Path(tree) / "src")}
                    out = subprocess.run(
                        [sys.executable, __file__, "--one", str(n), "--rate", str(args.rate),
                         "--warmup", str(args.warmup), "--after", str(args.after),
                         "--case", case],
                        env=env, capture_output=True, text=True, check=True)  # fmt: skip
                    runs.setdefault((tree, n), []).append(
                        json.loads(out.stdout.splitlines()[-1]))
                    loads.append(os.getloadavg()[0])
    print(f"Producer {args.rate:,.0f} rec/s acks=all on "
          f"another topic; {args.rounds} rounds, ranges; load average "
          f"{min(loads):.1f}-{max(loads):.1f} (1 min)")
    report(runs, trees, sizes)


def report(runs: dict[tuple[str, int], list[dict[str, Any]]], trees: list[str],
           sizes: list[int]) -> None:
    for name, what in (("lai", "LeaderAndIsr making N partitions"),
                       ("stop", "StopReplica deleting them"),
                       ("failover", "LeaderAndIsr moving N partitions led here to epoch 1"),
                       ("follow", "LeaderAndIsr making this broker follow N partitions it "
                                  "led (leader: another broker, epoch 1)"),
                       ("truncate", "N follower truncations on the fetcher's thread (the "
                                    "loop's), no load: the stall is their time")):
        if not any(f"{name}_ms" in r for rs in runs.values() for r in rs):
            continue
        runs_of = {k: [r for r in rs if f"{name}_ms" in r] for k, rs in runs.items()}
        print(f"{what}:")
        print(f"{'tree':<28} {'N':>5}  {'answered ms':>17}  {'loop stall max ms':>17}  "
              f"{'ack p99 ms':>17}  {'ack max ms':>17}")
        for n in sizes:
            for tree in trees:
                rs = runs_of[(tree, n)]
                print(f"{tree[-28:]:<28} {n:>5}  " + "  ".join(
                    span([r[f"{name}_{k}"] for r in rs])
                    for k in ("ms", "stall_max_ms", "ack_p99_ms", "ack_max_ms")))
            base = sorted(r[f"{name}_stall_max_ms"] for r in runs_of[(trees[-1], n)])
            for tree in trees[:-1]:
                mine = sorted(r[f"{name}_stall_max_ms"] for r in runs_of[(tree, n)])
                print(f"  N={n}: median loop stall max {mine[len(mine) // 2]:.1f} ms here, "
                      f"{base[len(base) // 2]:.1f} ms in {trees[-1]}")

if __name__ == "__main__":
    main()
