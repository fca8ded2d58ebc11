"""Transactional produce throughput against idempotent produce, same run, same broker.

One ``tidelog serve`` child process. For each mode confluent-kafka produces N records of S
bytes (acks=all, linger 5 ms) to a fresh 4-partition topic: ``idempotent`` with
enable.idempotence, ``txn-K`` with a transactional producer committing every K records (so
each commit costs AddPartitionsToTxn, EndTxn, the coordinator's three state writes and one
marker per partition). One warm-up round per mode, then REPEATS rounds in rotation (drift hits
every mode alike); figures are MB/s of record values and records/s, median and range, and
the ratio of each transactional mode to idempotent.

Measured on the shared 2-core dev machine, 3 rounds each. 50k x 256 B (two runs):
idempotent 20-21 MB/s [11-23]; txn-100 10 MB/s [9-11] (0.45-0.48x: a commit every 100
records is dominated by the commit's round trips); txn-1000 62-72 MB/s (3.0-3.4x);
txn-10000 123-133 MB/s (6x). 100k x 256 B (defaults): idempotent 34 MB/s [31-37]; txn-100
9.7 [9.7-10.2] (0.29x); txn-1000 65 [64-72] (1.9x); txn-10000 103 [93-117] (3.0x). Large
transactions beat idempotent produce here because librdkafka holds a transaction's records
until AddPartitionsToTxn answers, so they leave in full batches, and the broker's cost is per
request far more than per byte; with linger.ms=5 the idempotent producer sends many small
batches.

Run: .venv/bin/python bench/txn.py [--records 100000] [--size 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import confluent_kafka
from broker import free_port, wait_port  # bench/broker.py
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4


def start_broker(d: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tidelog.cli.main", "--log-level", "WARNING", "serve",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={os.path.join(d, 'logs')}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, f"127.0.0.1:{port}"


def _produce(p: confluent_kafka.Producer, topic: str, value: bytes) -> None:
    while True:
        try:
            p.produce(topic, value)
            return
        except BufferError:
            p.poll(0.05)


def _check_landed(bootstrap: str, topic: str, records: int) -> None:
    """Every record is in the log (markers add one offset per partition per commit)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check",
                                  "isolation.level": "read_committed"})
    ends = [c.get_watermark_offsets(confluent_kafka.TopicPartition(topic, i), 30)[1]
            for i in range(PARTITIONS)]
    c.close()
    assert sum(ends) >= records, (topic, ends, records)


def one_round(bootstrap: str, mode: str, records: int, size: int) -> float:
    """Seconds to produce ``records`` and have every one acknowledged (committed)."""
    return _timed_round(bootstrap, mode, records, size)


def _timed_round(bootstrap: str, mode: str, records: int, size: int) -> float:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
            "queue.buffering.max.messages": 1_000_000}
    value = os.urandom(size)
    if mode == "idempotent":
        p = confluent_kafka.Producer({**conf, "enable.idempotence": True})
        t0 = time.perf_counter()
        for _ in range(records):
            _produce(p, topic, value)
        assert p.flush(120) == 0
        elapsed = time.perf_counter() - t0
        _check_landed(bootstrap, topic, records)
        return elapsed
    every = int(mode.split("-")[1])
    p = confluent_kafka.Producer({**conf, "transactional.id": f"bench-{uuid.uuid4().hex}"})
    p.init_transactions(60)
    t0 = time.perf_counter()
    for start in range(0, records, every):
        p.begin_transaction()
        for _ in range(min(every, records - start)):
            _produce(p, topic, value)
        p.commit_transaction(120)
    elapsed = time.perf_counter() - t0
    _check_landed(bootstrap, topic, records)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--commit-every", type=int, nargs="+", default=[100, 1000, 10000])
    args = ap.parse_args()
    modes = ["idempotent"] + [f"txn-{k}" for k in args.commit_every]
    d = tempfile.mkdtemp(prefix="bench-txn-")
    proc, bootstrap = start_broker(d)
    try:
        for mode in modes:  # warm-up: the first transactional id creates __transaction_state
            one_round(bootstrap, mode, min(args.records, 10_000), args.size)
        times: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.repeats):
            for mode in modes:
                times[mode].append(one_round(bootstrap, mode, args.records, args.size))
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(d, ignore_errors=True)
    mb = args.records * args.size / 1e6
    base = statistics.median(times["idempotent"])
    print(f"{args.records} records x {args.size} B, {PARTITIONS} partitions, acks=all, "
          f"{args.repeats} rounds after warm-up (median [min-max])")
    for mode in modes:
        ts = times[mode]
        med = statistics.median(ts)
        print(f"{mode:>11}: {mb / med:7.1f} MB/s [{mb / max(ts):.1f}-{mb / min(ts):.1f}]  "
              f"{args.records / med:9.0f} rec/s  ratio to idempotent {base / med:.2f}")


if __name__ == "__main__":
    main()
