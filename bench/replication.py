"""Replication costs on one machine: a three-broker cluster (ZooKeeper and three
``tidelog serve`` processes, tidelog.testing.EmbeddedCluster).

1. Throughput: 100 B records from one librdkafka producer (bench/rdkafka_load.py, no Python in
   the per-record path), acks=all to a topic with replication factor 3 (min.insync.replicas 2)
   against acks=1 to a topic with replication factor 1 on the same cluster; runs alternate,
   median and range printed, and the ratio (Kafka's 2014 figures: acks=all about half).
2. Latency of acks=all at a fixed 5,000 records/s (confluent-kafka, linger.ms 1): p50, p99.
3. Failover: SIGKILL of a partition's leader while a producer writes acks=all every 5 ms; the
   time to the first acknowledgement of a record sent after the kill (ZooKeeper session
   expiry, election, LeaderAndIsr, the client's metadata refresh).
4. Controlled shutdown of a broker leading N partitions (SIGTERM to exit).

Usage: python bench/replication.py [records] [runs] [shutdown_partitions]
       (defaults 200000 3 1000; 0 partitions skips step 4)
"""

from __future__ import annotations

import signal
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cluster"))

from rdkafka_load import Producer as RdProducer

from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

VALUE = b"x" * 100


def wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)  # polling the cluster's state, not passing time


def create(cluster: EmbeddedCluster, name: str, partitions: int, rf: int, leader: int = 1,
           config: dict[str, str] | None = None, *, spread: bool = True) -> list[TopicPartition]:  # fmt: skip
    """A topic written to ZooKeeper; ``leader`` first in every assignment unless ``spread``
    rotates the assignments over the brokers."""
    ids = sorted(cluster.brokers)
    order = [leader] + [b for b in ids if b != leader]
    shift = (lambda p: p) if spread and partitions > 1 else (lambda p: 0)
    assignment = {p: z.ReplicaAssignment(tuple(order[(shift(p) + i) % len(order)] for i in range(rf)))
                  for p in range(partitions)}  # fmt: skip
    cluster.zk.create_topic(name, uuid.uuid4(), assignment, config or {})
    tps = [TopicPartition(name, p) for p in range(partitions)]

    def ready() -> bool:
        states = cluster.zk.get_topic_partition_states(tps)
        return len(states) == partitions and all(len(s.isr) == rf for s in states.values())

    wait(ready, 120, f"{name} ready")
    admin = ck.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    wait(lambda: all(p.leader >= 0 for p in admin.list_topics(name, timeout=10)
                     .topics[name].partitions.values()), 60, "leaders known")  # fmt: skip
    return tps


def throughput(cluster: EmbeddedCluster, records: int, runs: int) -> None:
    create(cluster, "rf3", 1, 3, config={"min.insync.replicas": "2"})
    create(cluster, "rf1", 1, 1)
    rates: dict[str, list[float]] = {"acks=all RF=3": [], "acks=1 RF=1": []}
    cases = [("acks=all RF=3", "rf3", "all"), ("acks=1 RF=1", "rf1", "1")]
    for _name, topic, acks in cases:  # warm-up
        p = RdProducer(cluster.bootstrap_servers, topic, config={"acks": acks, "linger.ms": "5"})
        p.produce(VALUE, 20_000)
        p.close()
    for _ in range(runs):
        for name, topic, acks in cases:
            p = RdProducer(
                cluster.bootstrap_servers, topic, config={"acks": acks, "linger.ms": "5"}
            )
            dt = p.produce(VALUE, records)
            p.close()
            rates[name].append(records / dt)
    for name, r in rates.items():
        print(f"{name:15s} median {statistics.median(r):10,.0f} rec/s  "
              f"range {min(r):,.0f}-{max(r):,.0f}  ({runs} runs of {records:,} x 100 B)")  # fmt: skip
    ratio = [a / b for a, b in zip(rates["acks=all RF=3"], rates["acks=1 RF=1"], strict=True)]
    print(f"acks=all RF=3 / acks=1 RF=1: median {statistics.median(ratio):.2f} "
          f"range {min(ratio):.2f}-{max(ratio):.2f}")  # fmt: skip


def idle_latency(cluster: EmbeddedCluster) -> None:
    """One record at a time (linger.ms 0): what a produce waits with nothing else going on."""
    for topic, label in (("rf3", "acks=all RF=3"), ("rf1", "acks=1 RF=1")):
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0,
                         "acks": "all" if topic == "rf3" else "1"})  # fmt: skip
        lat = []
        for _ in range(400):
            t = time.perf_counter()
            p.produce(topic, VALUE)
            p.flush(10)
            lat.append(time.perf_counter() - t)
        q = statistics.quantiles(lat[100:], n=100)
        print(
            f"{label}, one record at a time: p50 {q[49] * 1000:.2f} ms, p99 {q[98] * 1000:.2f} ms"
        )


def latency(cluster: EmbeddedCluster, rate: int = 5000, seconds: float = 6.0) -> None:
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                     "linger.ms": 1, "enable.idempotence": True})  # fmt: skip
    lat: list[float] = []

    def done(err: object, msg: object) -> None:
        if err is None:
            lat.append(time.perf_counter() - float(msg.key()))  # type: ignore[attr-defined]

    for _ in range(2000):  # warm-up
        p.produce("rf3", VALUE, key=str(time.perf_counter()).encode(), on_delivery=done)
    p.flush(30)
    lat.clear()
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        while time.perf_counter() < target:
            p.poll(0)
        p.produce("rf3", VALUE, key=str(time.perf_counter()).encode(), on_delivery=done)
    p.flush(30)
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    print(f"acks=all RF=3 at {rate:,} rec/s for {seconds:.0f} s: p50 {q[49] * 1000:.2f} ms, "
          f"p99 {q[98] * 1000:.2f} ms, max {lat[-1] * 1000:.1f} ms ({len(lat):,} acked)")  # fmt: skip


def failover(cluster: EmbeddedCluster) -> None:
    leader = 2
    tps = create(cluster, "failover", 1, 3, leader=leader, config={"min.insync.replicas": "2"})
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                     "linger.ms": 0, "enable.idempotence": True, "message.timeout.ms": 60000,
                     "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 50})  # fmt: skip
    killed_at: list[float] = []
    first_after: list[float] = []
    stop = threading.Event()

    def done(err: object, msg: object) -> None:
        sent = float(msg.key())  # type: ignore[attr-defined]
        if err is None and killed_at and sent > killed_at[0] and not first_after:
            first_after.append(time.perf_counter())

    def writer() -> None:
        while not stop.is_set():
            p.produce("failover", VALUE, key=str(time.perf_counter()).encode(), on_delivery=done)
            p.poll(0.005)
        p.flush(60)

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(2)  # steady writes before the kill
    killed_at.append(time.perf_counter())
    cluster.kill(leader)
    wait(lambda: bool(first_after), 90, "a write acknowledged by the new leader")
    stop.set()
    t.join()
    new = cluster.zk.get_topic_partition_states(tps)[tps[0]].leader
    print(f"failover: SIGKILL of leader {leader} -> first acked write on leader {new} after "
          f"{first_after[0] - killed_at[0]:.2f} s (zookeeper.session.timeout.ms 6000)")  # fmt: skip
    cluster.brokers[leader].start()


def controlled_shutdown(cluster: EmbeddedCluster, partitions: int) -> None:
    victim = 3
    t0 = time.perf_counter()
    create(cluster, "many", partitions, 3, leader=victim, spread=False)
    made = time.perf_counter() - t0
    states = cluster.zk.get_topic_partition_states(
        [TopicPartition("many", p) for p in range(partitions)]
    )
    led = sum(1 for s in states.values() if s.leader == victim)
    t0 = time.perf_counter()
    cluster.brokers[victim].signal(signal.SIGTERM)
    code = cluster.brokers[victim].wait(300)
    took = time.perf_counter() - t0
    print(f"controlled shutdown of broker {victim} leading {led} of {partitions} partitions "
          f"(RF 3): {took:.2f} s to exit (code {code}); topic created in {made:.1f} s")  # fmt: skip


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    shutdown_partitions = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    config = {"zookeeper.session.timeout.ms": "6000"}
    with EmbeddedCluster(brokers=3, config=config) as cluster:
        wait(lambda: len(cluster.zk.get_all_brokers()) == 3, 60, "brokers registered")
        throughput(cluster, records, runs)
        idle_latency(cluster)
        latency(cluster)
        failover(cluster)
        if shutdown_partitions:
            controlled_shutdown(cluster, shutdown_partitions)


if __name__ == "__main__":
    main()
