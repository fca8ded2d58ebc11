"""The native core (tidelog._native) against its pure-Python twins, in one run.

Sections (each figure as min .. max over RUNS repeated runs after a warm-up; the Python
fallback is measured beside the native core in the same process, by binding the hot loops
to their twins, or in a second broker process started with TIDELOG_PURE_PYTHON=1):

1. loops: the validator's record walk and the cleaner's record scan, records/s, on
   uncompressed 100 B records in batches of 16 KiB;
2. cleaner: one full cleaning round (bench/cleaner.py's setup: 10% unique keys, batches of
   50) of 100 B records, MB/s of input, next to a plain copy of the same files;
3. broker: one librdkafka producer, acks=1, linger.ms=5, one partition, against
   ``tidelog serve`` (native, then Python) and Tansu (memory storage) started in the same
   run: records/s and broker CPU-seconds per million records (utime+stime of the broker
   process from /proc, all threads), at 100 B and 1 KiB.

Tansu is found through $TANSU (a binary, or a script printing the binary's path) or
../shared/bin/tansu beside the repository; section 3 is skipped without it.

Usage: python bench/native.py [loops|cleaner|broker ...]   (default: all)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tidelog import _native
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.storage import validator
from tidelog.storage.cleaner import batch_filter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
import cleaner as cleaner_bench

RUNS = 5
MiB = 1024 * 1024


def rng(values: list[float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(min(values))} .. {fmt.format(max(values))}"


@contextmanager
def python_core() -> Iterator[None]:
    """Bind the hot loops to their pure-Python twins for the duration."""
    saved = validator._walk, batch_filter._scan
    validator._walk, batch_filter._scan = validator._walk_py, batch_filter._scan_py
    try:
        yield
    finally:
        validator._walk, batch_filter._scan = saved


def repeat(fn: Callable[[], float], runs: int = RUNS) -> list[float]:
    fn()  # warm-up
    return [fn() for _ in range(runs)]


# -- 1. loops ---------------------------------------------------------------------------------
def make_batches(value_size: int, total: int) -> list[RecordBatch]:
    value = os.urandom(value_size // 2).hex().encode()[:value_size]
    per_batch = max(1, 16 * 1024 // (value_size + 20))
    out, n = [], 0
    while n * (value_size + 20) < total:
        b = RecordBatchBuilder(CompressionType.NONE)
        for i in range(per_batch):
            b.append(1_700_000_000_000 + i, b"key-%08d" % (n + i), value)
        out.append(RecordBatch(b.build()))
        n += per_batch
    return out


def loops() -> None:
    batches = make_batches(100, 32 * MiB)
    n = sum(b.records_count for b in batches)
    payloads = [(bytes(b.records_payload()), b.records_count) for b in batches]
    print(f"\n1. per-record loops, {n:,} records of 100 B, uncompressed (records/s)")

    def walk() -> float:
        t = time.perf_counter()
        for p, c in payloads:
            validator._walk(p, c)
        return n / (time.perf_counter() - t)

    def scan() -> float:
        t = time.perf_counter()
        for b in batches:
            batch_filter.scan_records(b)
        return n / (time.perf_counter() - t)

    for name, fn in (("validator walk", walk), ("cleaner record scan", scan)):
        native = repeat(fn) if _native.core is not None else []
        with python_core():
            py = repeat(fn)
        ratio = f"{min(native) / max(py):.1f}x .. {max(native) / min(py):.1f}x" if native else "-"
        print(f"  {name:<22} native {rng(native) if native else 'not built':>24} | "
              f"python {rng(py):>22} | native/python {ratio}")


# -- 2. cleaner -------------------------------------------------------------------------------
def cleaner(input_mib: float = 16) -> None:
    size = int(input_mib * MiB)
    print(f"\n2. cleaner, 100 B records, {input_mib:g} MiB input, 10% unique keys (MB/s of input)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        c = cleaner_bench.make_cleaner()
        figures: dict[str, list[float]] = {"native": [], "python": [], "plain copy": []}
        for i in range(3):
            for name in ("native", "python"):
                if name == "native" and _native.core is None:
                    continue
                d = root / f"b{i}{name}-0"
                lg = cleaner_bench.build(d, 100, size, CompressionType.NONE)
                mb = lg.size_in_bytes / MiB
                if name == "native":
                    secs = cleaner_bench.clean_round(c, lg)[0]
                else:
                    with python_core():
                        secs = cleaner_bench.clean_round(c, lg)[0]
                figures[name].append(mb / secs)
                figures["plain copy"].append(mb / cleaner_bench.plain_copy(d, root / "copy"))
                lg.close()
        for name, values in figures.items():
            if values:
                print(f"  {name:<12} {rng(values, '{:.1f}'):>16} MB/s")


# -- 3. broker --------------------------------------------------------------------------------
def tansu_path() -> str | None:
    repo = Path(__file__).resolve().parents[1]
    cand = os.environ.get("TANSU") or str(repo.parent / "shared" / "bin" / "tansu")
    return cand if os.path.exists(cand) else None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_figures(bootstrap: str, pid: int, size: int, n: int) -> tuple[float, float]:
    """(records/s, broker CPU-s per million records) of one timed produce run."""
    topic = f"native-{size}-{time.monotonic_ns()}"
    broker_bench.produce(bootstrap, topic, 1000, size)  # topic creation + warm-up
    cpu0 = cpu_seconds(pid)
    secs = broker_bench.produce(bootstrap, topic, n, size)
    return n / secs, (cpu_seconds(pid) - cpu0) / n * 1e6


def broker(runs: int = 3) -> None:
    counts = {100: 200_000, 1024: 50_000}
    brokers: list[tuple[str, Callable[[], object]]] = [
        ("tidelog native", lambda: broker_bench.tidelog_broker(env={})),
        ("tidelog python", lambda: broker_bench.tidelog_broker(
            env={_native.PURE_PYTHON_ENV: "1"})),
    ]
    tansu = tansu_path()
    if tansu is not None:
        brokers.append(("tansu (baseline)", lambda: broker_bench.tansu_broker(tansu)))
    print("\n3. produce, one librdkafka producer, acks=1, linger.ms=5, one partition")
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(runs):  # interleaved, so the machine's noise falls on every broker alike
        for name, factory in brokers:
            with factory() as (bootstrap, pid):  # type: ignore[attr-defined]
                for size, n in counts.items():
                    results.setdefault((name, size), []).append(
                        produce_figures(bootstrap, pid, size, n))
    for size, n in counts.items():
        print(f" {n:,} records of {size} B ({runs} runs)")
        for name, _ in brokers:
            rates = [r for r, _ in results[(name, size)]]
            cpus = [c for _, c in results[(name, size)]]
            print(f"  {name:<18} {rng(rates):>22} rec/s | broker CPU "
                  f"{rng(cpus, '{:.2f}'):>13} s per M records")
        if tansu is not None:
            base = results[("tansu (baseline)", size)]
            for name, _ in brokers[:2]:
                mine = results[(name, size)]
                rate = [a[0] / b[0] for a in mine for b in base]
                cpu = [a[1] / b[1] for a in mine for b in base]
                print(f"  {name + '/tansu':<24} rate {rng(rate, '{:.2f}')}x | "
                      f"CPU {rng(cpu, '{:.2f}')}x")


def main() -> None:
    sections = sys.argv[1:] or ["loops", "cleaner", "broker"]
    print(f"tidelog core: {_native.core_description}")
    for s in sections:
        {"loops": loops, "cleaner": cleaner, "broker": broker}[s]()


if __name__ == "__main__":
    main()
