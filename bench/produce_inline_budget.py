"""The per-request budget of bytes a Produce writes on the event loop
(tidelog.log.append.writer.inline.bytes summed over its partitions), through an embedded broker:
one Produce naming 8 partitions with a 900 KB batch each (900 records of 1,000 B), acks=-1,
sent again and again by tidelog's raw client. Printed per rule: the loop thread's CPU in the
partitions' appends per request (validation, offsets and the writes made there), how many of
the 8 were handed to the writer thread, and the request's round trip at the client. The former
rule (each partition's batch checked alone against inline.bytes) runs in the same process,
alternating.

    .venv/bin/python bench/produce_inline_budget.py [--requests 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.records.builder import build_batch
from tidelog.server.replica_manager import ReplicaManager
from tidelog.testing import EmbeddedBroker

PARTITIONS = 8


def former_rule(rm: ReplicaManager) -> Callable[..., object]:
    """``_append_async`` checking each batch alone against inline.bytes (no request budget)."""
    def per_batch(tp: object, records: bytes, acks: int, produce: object) -> object:
        return rm.append_async(tp, records, required_acks=acks)  # type: ignore[arg-type]
    return per_batch


def run(client: KafkaClient, rm: ReplicaManager, batches: dict[TopicPartition, bytes],
        requests: int, budget: bool) -> str:
    real = type(rm)._append_async.__get__(rm)
    inner = real if budget else former_rule(rm)
    loop_s: list[float] = []
    handed = [0]

    def timed(*a: object) -> object:
        t = time.thread_time()  # (on the broker's loop thread)
        out = inner(*a)
        loop_s[-1] += time.thread_time() - t
        handed[0] += out[1] is not None  # type: ignore[index]
        return out

    rm._append_async = timed  # type: ignore[method-assign]
    leader = client.leader_for(next(iter(batches)))
    rtt: list[float] = []
    for _ in range(requests):
        loop_s.append(0.0)
        t = time.perf_counter()
        client.produce(leader, batches)
        rtt.append(time.perf_counter() - t)
    del rm._append_async
    ms = sorted(x * 1e3 for x in loop_s)
    rt = sorted(x * 1e3 for x in rtt)
    return (f"  {'request budget' if budget else 'per batch':<14} loop CPU in appends: median "
            f"{statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms per request; handed "
            f"{handed[0] / requests:.1f}/{PARTITIONS}; round trip median "
            f"{statistics.median(rt):.1f} ms, p90 {rt[int(len(rt) * 0.9)]:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    value = os.urandom(1000)
    with EmbeddedBroker() as broker, \
            KafkaClient(broker.bootstrap_servers) as client:
        client.create_topics({"budget": PARTITIONS})
        tps = [TopicPartition("budget", p) for p in range(PARTITIONS)]
        batch = build_batch([(1_700_000_000_000, None, value) for _ in range(900)])
        batches = dict.fromkeys(tps, batch)
        rm = broker.broker.replica_manager
        client.produce(client.leader_for(tps[0]), batches)  # the leader epochs start
        print(f"{PARTITIONS} x {len(batch):,} B per Produce, {args.requests} requests per "
              f"run; load average {os.getloadavg()[0]:.2f}")
        for _ in range(args.repeats):
            for budget in (False, True):
                print(run(client, rm, batches, args.requests, budget), flush=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
