"""Follower fetch sessions (KIP-227) against sessionless follower fetches: the brokers' CPU
with many partitions of replication factor 3 (ZooKeeper and three ``tidelog serve`` processes,
tidelog.testing.EmbeddedCluster), idle and under light load.

Each run starts a fresh cluster with ``tidelog.replica.fetch.session.enable`` true or false
(alternating, the order swapped every run), creates the topic (leaders spread over the three
brokers), lets the followers settle, then measures over a window:

* idle: nothing produced (after every follower's first Fetch and a settling pause); every
  follower long-polls its leaders (replica.fetch.wait.max.ms 500), with sessions naming no
  partition, without naming all it follows there;
* light load: one producer writing ``rate`` records/s of 100 B, acks=1, round-robin over
  every partition, so follower rounds are woken by new data all the time.

Reported per case: CPU seconds the three broker processes used per second of wall time
(utime + stime from /proc; 1.0 is one core), follower Fetch requests/s and partitions named
per request, read from the leaders' /metrics (tidelog_fetch_*{fetcher="follower"}); median
and min-max over the runs, with the load average before and after.

Usage: python bench/fetch_sessions.py [runs] [partitions] [seconds] [rate]
       (defaults 3 1000 10 1000)
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cluster"))

from replication import wait
from replication_support import metric

from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "sessions"
VALUE = b"x" * 100
CONFIG = {"http.listeners": "http://127.0.0.1:0", "auto.leader.rebalance.enable": "false",
          "num.partitions": "1", "log.segment.bytes": str(8 << 20)}  # fmt: skip
Figures = dict[str, float]


def create(cluster: EmbeddedCluster, partitions: int) -> None:
    """The topic written to ZooKeeper, leaders rotating over the brokers; returns once every
    partition has a full ISR."""
    ids = sorted(cluster.brokers)
    assignment = {p: z.ReplicaAssignment(tuple(ids[(p + i) % 3] for i in range(3)))
                  for p in range(partitions)}  # fmt: skip
    cluster.zk.create_topic(TOPIC, uuid.uuid4(), assignment, {})
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]

    def ready() -> bool:
        states = cluster.zk.get_topic_partition_states(tps)
        return len(states) == partitions and all(len(s.isr) == 3 for s in states.values())

    wait(ready, 600, "full ISRs")


def cpu_seconds(cluster: EmbeddedCluster) -> float:
    """utime + stime of the broker processes (Linux /proc)."""
    total = 0
    for b in cluster.brokers.values():
        assert b.proc is not None
        fields = Path(f"/proc/{b.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def fetch_counts(cluster: EmbeddedCluster) -> tuple[float, float]:
    """Follower Fetch requests and partitions they named, summed over the leaders (a scrape
    of a broker busy starting up may time out: asked again)."""
    for attempt in range(5):
        try:
            requests = named = 0.0
            for b in cluster.brokers:
                requests += metric(cluster, b, 'tidelog_fetch_requests_total{fetcher="follower"}')
                named += metric(cluster, b,
                                'tidelog_fetch_partitions_requested_total{fetcher="follower"}')  # fmt: skip
            return requests, named
        except OSError:
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def window(cluster: EmbeddedCluster, seconds: float) -> Figures:
    cpu0, (req0, named0), t0 = cpu_seconds(cluster), fetch_counts(cluster), time.monotonic()
    time.sleep(seconds)  # the measured window
    cpu1, (req1, named1), t1 = cpu_seconds(cluster), fetch_counts(cluster), time.monotonic()
    elapsed = t1 - t0
    requests = req1 - req0
    return {"cpu": (cpu1 - cpu0) / elapsed, "fetches/s": requests / elapsed,
            "partitions/fetch": (named1 - named0) / max(requests, 1)}  # fmt: skip


def loaded(cluster: EmbeddedCluster, partitions: int, rate: int, seconds: float) -> Figures:
    stop = threading.Event()
    errors: list[str] = []

    def produce() -> None:
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1",
                         "linger.ms": 5})  # fmt: skip
        i, start = 0, time.monotonic()
        while not stop.is_set():
            due = start + i / rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)  # pacing the producer to its rate
            p.produce(TOPIC, VALUE, partition=i % partitions,
                      on_delivery=lambda err, _m: err is None or errors.append(str(err)))  # fmt: skip
            p.poll(0)
            i += 1
        p.flush(30)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    time.sleep(3)  # warm-up: the producer's connections and the first rounds
    figures = window(cluster, seconds)
    stop.set()
    t.join(60)
    if errors:
        raise RuntimeError(f"produce failed: {errors[:3]}")
    return figures


def one_run(zk: ZooKeeperServer, sessions: bool, partitions: int, seconds: float,
            rate: int) -> tuple[Figures, Figures]:  # fmt: skip
    config = {**CONFIG, "tidelog.replica.fetch.session.enable": str(sessions).lower()}
    with EmbeddedCluster(brokers=3, zookeeper=zk, config=config) as cluster:
        create(cluster, partitions)
        # the ISR is full from the start: wait for every follower's first Fetch (each
        # partition named by its two followers), then settle
        wait(lambda: fetch_counts(cluster)[1] >= 2 * partitions, 300, "first follower fetches")
        time.sleep(5)  # settle: the sessions opened, the first answers taken
        idle = window(cluster, seconds)
        load = loaded(cluster, partitions, rate, seconds)
        return idle, load


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.3f}  ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    args = [int(a) for a in sys.argv[1:]]
    runs, partitions, seconds, rate = (args + [3, 1000, 10, 1000][len(args):])[:4]
    print(f"load average before: {os.getloadavg()}", flush=True)
    results: dict[tuple[str, bool], list[Figures]] = {}
    with ZooKeeperServer() as zk:
        for run in range(runs):
            for sessions in ((True, False) if run % 2 == 0 else (False, True)):
                idle, load = one_run(zk, sessions, partitions, seconds, rate)
                results.setdefault(("idle", sessions), []).append(idle)
                results.setdefault(("load", sessions), []).append(load)
                print(f"run {run} sessions={sessions}: idle {idle} load {load}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"{partitions} partitions RF=3, {runs} runs of {seconds:.0f} s, light load "
          f"{rate} records/s; median (min-max)")
    for case in ("idle", "load"):
        for sessions in (True, False):
            figures = results[(case, sessions)]
            name = f"{case:4} sessions {'on ' if sessions else 'off'}"
            print(f"{name}  cpu {summary([f['cpu'] for f in figures])}  fetches/s "
                  f"{summary([f['fetches/s'] for f in figures])}  partitions/fetch "
                  f"{summary([f['partitions/fetch'] for f in figures])}")


if __name__ == "__main__":
    main()
