"""tidelog against the minimal baseline broker (bench/baseline_broker.py) under the same
librdkafka load, alternating: the share of this machine's produce ceiling tidelog reaches.

Each run starts every broker in turn (fresh log dir), loads it with one librdkafka producer
driven through ctypes (bench/rdkafka_load.py: no Python per record; acks=1, linger.ms=5,
batch.size 1 MB, one partition) at 100 B and at 1 KiB, and stops it. tidelog runs three
times: as configured by default (appends under tidelog.log.append.writer.inline.bytes, 1 MiB,
with none in flight written on the event loop), with every append of 64 KiB or more handed to
the log dir's writer thread (inline.bytes=65536, the former default) and with every append on
the event loop (tidelog.log.append.writer.enable=false). Printed per size: records/s median [min ..
max] per broker, and tidelog's ratio to the baseline of the same run (paired), with the load
average before and after.

``--brokers`` picks among them and three more, the loop thread's scheduler slice
(server/sched_slice.py, server/slice_governor.py): ``kernel-slice`` (``TIDELOG_LOOP_SLICE_US=0``),
``slice`` (100 µs, kept however busy the loop) and ``governed`` (100 µs, the kernel's while
the loop is over half busy).

    .venv/bin/python bench/baseline.py [--runs 5] [--sizes 100,1024] [--scale 1]
        [--brokers baseline,default,writer64k,loop,kernel-slice,slice,governed]
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
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
import rdkafka_load

import native

RECORDS = {100: 1_500_000, 1024: 200_000}
LOAD = {"acks": "1", "linger.ms": "5", "batch.size": "1000000"}
Factory = Callable[[], AbstractContextManager[tuple[str, int]]]


@contextmanager
def baseline_broker(partitions: int = 1, per_partition: bool = False, spin_us: int = 0
                    ) -> Iterator[tuple[str, int]]:
    """bench/baseline_broker.py in a child process: (bootstrap, pid); ``per_partition``, a
    file per partition (its ``--file-per-partition``); ``spin_us``, its ``--spin-us``."""
    port = broker_bench.free_port()
    d = tempfile.mkdtemp(prefix="baseline-", dir=os.environ.get("BENCH_DIR"))
    script = Path(__file__).resolve().parent / "baseline_broker.py"
    proc = subprocess.Popen([sys.executable, str(script), "--port", str(port),
                             "--file", str(Path(d) / "00000000000000000000.log"),
                             "--partitions", str(partitions), "--spin-us", str(spin_us)]
                            + (["--file-per-partition"] if per_partition else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        broker_bench.wait_port(port, proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(d, ignore_errors=True)


SLICE = {"TIDELOG_LOOP_SLICE_US": "100"}  # the loop's 100 µs slice (server/sched_slice.py)
BROKERS: dict[str, tuple[str, Factory]] = {
    "baseline": ("baseline", baseline_broker),
    "default": ("tidelog (default)", lambda: broker_bench.tidelog_broker()),
    "writer64k": ("tidelog (writer >=64 KiB)", lambda: broker_bench.tidelog_broker(
        overrides={"tidelog.log.append.writer.inline.bytes": str(64 << 10)})),
    "loop": ("tidelog (on the loop)", lambda: broker_bench.tidelog_broker(
        overrides={"tidelog.log.append.writer.enable": "false"})),
    "kernel-slice": ("tidelog (kernel's slice)", lambda: broker_bench.tidelog_broker(
        env={"TIDELOG_LOOP_SLICE_US": "0"})),
    "slice": ("tidelog (100 us slice, kept)", lambda: broker_bench.tidelog_broker(
        env={**SLICE, "TIDELOG_LOOP_SLICE_BUSY": "1"})),
    "governed": ("tidelog (100 us slice, governed)", lambda: broker_bench.tidelog_broker(
        env={**SLICE, "TIDELOG_LOOP_SLICE_BUSY": "0.5"})),
}


def rate(bootstrap: str, pid: int, size: int, n: int,
         settings: dict[str, str] | None = None) -> tuple[float, float]:
    """(records/s, broker CPU-seconds per million records) of one timed run of ``n``;
    ``settings`` are the producer's librdkafka settings (default LOAD)."""
    topic = f"baseline-{size}-{time.monotonic_ns()}"
    value = os.urandom(size // 2).hex().encode()[:size]
    p = rdkafka_load.Producer(bootstrap, topic, 0, LOAD if settings is None else settings)
    try:
        p.produce(value, 20_000)  # connection, metadata, topic creation, warm-up
        cpu0 = native.cpu_seconds(pid)
        secs = p.produce(value, n)
        return n / secs, (native.cpu_seconds(pid) - cpu0) / n * 1e6
    finally:
        p.close()


def fmt(values: list[float], spec: str = "{:,.0f}") -> str:
    return (f"{spec.format(statistics.median(values))} "
            f"[{spec.format(min(values))} .. {spec.format(max(values))}]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "5")))
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="records per run times this (longer runs average a busy machine)")
    ap.add_argument("--brokers", default="baseline,default,writer64k,loop",
                    help=f"comma-separated, baseline first: {', '.join(BROKERS)}")
    args = ap.parse_args()
    chosen = [BROKERS[b] for b in args.brokers.split(",")]
    if chosen[0][0] != "baseline":
        raise SystemExit("--brokers: the baseline first (the ratios are over it)")
    sizes = [int(s) for s in args.sizes.split(",")]
    records = {size: int(RECORDS[size] * args.scale) for size in sizes}
    load_before = os.getloadavg()
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.runs):  # alternating: the machine's noise falls on every broker
        for name, factory in chosen:
            with factory() as (bootstrap, pid):
                for size in sizes:
                    results.setdefault((name, size), []).append(
                        rate(bootstrap, pid, size, records[size]))
    load_after = os.getloadavg()
    print(f"one librdkafka producer (ctypes, no Python per record), acks=1, linger.ms=5, "
          f"batch.size 1 MB, one partition; {args.runs} runs alternating; load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after")
    for size in sizes:
        print(f" {records[size]:,} records of {size} B: records/s, broker CPU-s per M records "
              f"(all threads); median [min .. max], ratios paired by run")
        base = results[("baseline", size)]
        for name, _ in chosen:
            mine = results[(name, size)]
            line = (f"  {name:<26} {fmt([r for r, _ in mine]):>34} rec/s "
                    f"{fmt([c for _, c in mine], '{:.3f}'):>24} CPU-s")
            if name != "baseline":
                ratio = [a[0] / b[0] for a, b in zip(mine, base, strict=True)]
                cpu = [a[1] / b[1] for a, b in zip(mine, base, strict=True)]
                line += (f"  rate {fmt(ratio, '{:.2f}')}x, CPU {fmt(cpu, '{:.2f}')}x "
                         f"of the baseline")
            print(line)


if __name__ == "__main__":
    main()
