"""Broker CPU per produced record, end to end: tidelog, the minimal baseline broker
(bench/baseline_broker.py) and Tansu under the same librdkafka load, alternating.

Each run starts every broker in turn (fresh log dir), loads it with one librdkafka producer
driven through ctypes (bench/rdkafka_load.py: no Python per record; one partition) in each
load, and stops it:

* ``100``: 100 B records, acks=1, linger.ms 5, batch.size 1 MB (bench/native.py's load);
* ``1024``: the same with 1 KiB records;
* ``100i``: 100 B records from an idempotent producer, acks=all, linger.ms 5, batch.size 1 MB.

Printed per load: records/s and the broker's CPU-seconds per million records (utime+stime of
its process from /proc, every thread), median [min .. max] over the runs, and tidelog's
ratios to the baseline and to Tansu of the same run (paired), with the load average before
and after. Tansu is found as bench/native.py finds it; without it the Tansu column is left
out.

    .venv/bin/python bench/produce_cpu.py [--runs 5] [--loads 100,1024,100i] [--scale 1]
        [--brokers tidelog,baseline,tansu,other --other-src DIR] [--override K=V ...]

``other`` is a second tidelog source tree (``--other-src``, put on PYTHONPATH): the build
before a change, alternated with the current one in the same sitting. ``--override`` sets a
broker config of ``tidelog`` only (repeatable): with ``--brokers tidelog,other --other-src
src``, one build with and without a setting.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
from baseline import baseline_broker, fmt, rate

import native

Factory = Callable[[], AbstractContextManager[tuple[str, int]]]
LOADS: dict[str, tuple[int, int, dict[str, str]]] = {  # records, size, librdkafka settings
    "100": (1_500_000, 100, {"acks": "1", "linger.ms": "5", "batch.size": "1000000"}),
    "1024": (200_000, 1024, {"acks": "1", "linger.ms": "5", "batch.size": "1000000"}),
    "100i": (1_500_000, 100, {"acks": "all", "enable.idempotence": "true", "linger.ms": "5",
                              "batch.size": "1000000"}),
}


def brokers(names: list[str], other_src: str | None = None,
            overrides: dict[str, str] | None = None) -> list[tuple[str, Factory]]:
    out: list[tuple[str, Factory]] = []
    tansu = native.tansu_path()
    for name in names:
        if name == "tidelog":
            out.append((name, lambda: broker_bench.tidelog_broker(overrides=overrides)))
        elif name == "other" and other_src:
            out.append((name, lambda: broker_bench.tidelog_broker(
                env={"PYTHONPATH": other_src})))
        elif name == "baseline":
            out.append((name, baseline_broker))
        elif name == "tansu" and tansu is not None:
            out.append((name, lambda: broker_bench.tansu_broker(tansu)))
    return out


def measure(bootstrap: str, pid: int, load: str, scale: float) -> tuple[float, float]:
    """(records/s, broker CPU-seconds per million records) of one timed run."""
    n, size, settings = LOADS[load]
    return rate(bootstrap, pid, size, int(n * scale), settings)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "5")))
    ap.add_argument("--loads", default="100,1024,100i")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--brokers", default="tidelog,baseline,tansu")
    ap.add_argument("--other-src", help="a second tidelog source tree, run as broker "
                    "'other' (PYTHONPATH): two builds alternated in one sitting")
    ap.add_argument("--override", action="append", default=[], metavar="K=V",
                    help="a broker config of 'tidelog' (not of 'other')")
    args = ap.parse_args()
    loads = args.loads.split(",")
    overrides = dict(o.split("=", 1) for o in args.override)
    chosen = brokers(args.brokers.split(","), args.other_src, overrides)
    names = [n for n, _ in chosen]
    before = os.getloadavg()
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        for name, factory in chosen:
            with factory() as (bootstrap, pid):
                for load in loads:
                    results.setdefault((name, load), []).append(
                        measure(bootstrap, pid, load, args.scale))
    after = os.getloadavg()
    print(f"one librdkafka producer (ctypes), one partition; {args.runs} runs alternating; "
          f"load average {before[0]:.2f} before, {after[0]:.2f} after")
    for load in loads:
        n, size, settings = LOADS[load]
        print(f" {int(n * args.scale):,} records of {size} B, {settings}: records/s, broker "
              f"CPU-s per M records; median [min .. max], ratios paired by run")
        for name in names:
            mine = results[(name, load)]
            line = (f"  {name:<9} {fmt([r for r, _ in mine]):>34} rec/s "
                    f"{fmt([c for _, c in mine], '{:.3f}'):>24} CPU-s")
            if name == "tidelog":
                for other in names[1:]:
                    base = results[(other, load)]
                    rate = [a[0] / b[0] for a, b in zip(mine, base, strict=True)]
                    cpu = [a[1] / b[1] for a, b in zip(mine, base, strict=True)]
                    line += (f"\n            vs {other}: rate {fmt(rate, '{:.2f}')}x, "
                             f"CPU {fmt(cpu, '{:.2f}')}x")
            print(line, flush=True)


if __name__ == "__main__":
    main()
