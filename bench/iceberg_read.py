"""A flush's shared read step, alone: 100,000 records (about 220 a batch, as a producer with
linger.ms=5 sends them to six partitions; 6-byte keys, 36-byte values) from their v2 batches
to the raw columns every mode starts from (iceberg/record_columns.py raw_columns: the
columnar pass, then Arrow arrays over its buffers), CPU time per repeat; then how long a 1 ms
timer sleep (an event loop's wake-up) takes while another thread runs the columnar pass in a
loop, against an idle process: the pass runs with the GIL released, so the timer should wake
about on time (with the GIL held it waited for a whole pass and a switch interval).

    .venv/bin/python bench/iceberg_read.py [--records 100000] [--repeats 15] [--seconds 4]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time

from tidelog.iceberg.record_columns import raw_columns
from tidelog.records import RecordBatch, RecordBatchBuilder
from tidelog.spark.columns import decode_columns

PER_BATCH = 222


def batches(n: int) -> list[RecordBatch]:
    rng = random.Random(7)
    out, offset = [], 0
    while offset < n:
        b = RecordBatchBuilder(base_offset=offset)
        for _ in range(min(PER_BATCH, n - offset)):
            b.append(1_700_000_000_000 + offset, str(offset).encode(), rng.randbytes(36), [],
                     offset=offset)
            offset += 1
        out.append(RecordBatch(b.build()))
    return out


def timer_waits(seconds: float) -> list[float]:
    """ms each 1 ms sleep took, for ``seconds``."""
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        time.sleep(0.001)
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def quantiles(waits: list[float]) -> str:
    return (f"p50 {waits[len(waits) // 2]:.2f} ms, p99 {waits[int(len(waits) * 0.99)]:.2f} "
            f"ms, max {waits[-1]:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    run = batches(args.records)
    bufs, payloads = [b.buf for b in run], [None] * len(run)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} records in {len(run)} "
          f"batches")
    for name, step in (("columnar pass", lambda: decode_columns(bufs, payloads, 0, 2**62, True)),
                       ("raw columns", lambda: raw_columns(run, 0, 0, 2**62))):
        ms = []
        for _ in range(args.repeats):
            c0 = time.thread_time()
            step()
            ms.append((time.thread_time() - c0) * 1000)
        print(f"{name}: {statistics.median(ms):.2f} ms [{min(ms):.2f} .. {max(ms):.2f}] CPU")
    print(f"1 ms timer, idle: {quantiles(timer_waits(args.seconds / 2))}")
    stop, passes = threading.Event(), [0]

    def decode() -> None:
        while not stop.is_set():
            decode_columns(bufs, payloads, 0, 2**62, True)
            passes[0] += 1

    worker = threading.Thread(target=decode)
    worker.start()
    try:
        waits = timer_waits(args.seconds)
    finally:
        stop.set()
        worker.join()
    print(f"1 ms timer, the pass looping beside it ({passes[0]} passes): {quantiles(waits)}")


if __name__ == "__main__":
    main()
