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
   process from /proc, all threads), at 100 B and 1 KiB. The figure's load is librdkafka
   driven through ctypes (bench/rdkafka_load.py: 10,000 records per rd_kafka_produce_batch
   call, no Python per record); beside it the same producer driven by confluent-kafka's
   produce() per record, which caps one producer near 0.8 M records/s at 100 B, where both
   brokers sit: that load measures the client more than the broker. Each broker's log dir
   (tidelog: ext4 page cache) is fresh per run;
4. durable: 1, 8 and 64 concurrent librdkafka producers (threads driving librdkafka through
   bench/rdkafka_load.py, acks=all, linger.ms=1, 100 B) on one partition with
   flush.messages=1 (group commit) against the same broker's default topic (no fsync),
   records/s, broker and load CPU-seconds per million records and the machine's busy CPUs,
   native and Python broker (a fresh broker per run, both modes in it, first in turn). The log dir is under $BENCH_DIR (default: the
   system temp dir) -- put it on a real disk: on tmpfs an fsync costs nothing;
5. recovery: unclean recovery (LogSegment.recover: every batch's header and CRC, offset and
   time indexes rebuilt) of a 256 MiB segment of 16 KiB batches, next to a hot read (page
   cache) of the same file in 1 MiB chunks; native, Python (the fast path's twin) and the
   reference per-batch code alone in the same process.

Tansu is found through $TANSU (a binary, or a script printing the binary's path) or
../shared/bin/tansu beside the repository; section 3 is skipped without it.

Usage: python bench/native.py [loops|cleaner|broker|durable|recovery ...]   (default: all)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from tidelog import _native
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.storage import recovery_scan, validator
from tidelog.storage.cleaner import batch_filter
from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
import cleaner as cleaner_bench
import rdkafka_load

RUNS = 5
MiB = 1024 * 1024


def rng(values: list[float], fmt: str = "{:,.0f}") -> str:
    """min .. max (median) of repeated runs."""
    mid = sorted(values)[len(values) // 2]
    return f"{fmt.format(min(values))} .. {fmt.format(max(values))} ({fmt.format(mid)})"


@contextmanager
def python_core() -> Iterator[None]:
    """Bind the hot loops to their pure-Python twins for the duration."""
    saved = validator._walk, batch_filter._scan, SkimpyOffsetMap._native, recovery_scan.scan_run
    validator._walk, batch_filter._scan = validator._walk_py, batch_filter._scan_py
    SkimpyOffsetMap._native, recovery_scan.scan_run = None, recovery_scan.scan_run_py
    try:
        yield
    finally:
        (validator._walk, batch_filter._scan, SkimpyOffsetMap._native,
         recovery_scan.scan_run) = saved


@contextmanager
def reference_recovery() -> Iterator[None]:
    """Recovery without the fast path: every batch through the reference per-batch code
    (what recovery ran before the scan had a fast path)."""
    saved = recovery_scan.scan_run
    recovery_scan.scan_run = lambda buf, off, interval, base, s: recovery_scan.ScanResult(
        off, s, b"", b"", [], [], -1)
    try:
        yield
    finally:
        recovery_scan.scan_run = saved


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
    print(f"\n2. cleaner, 100 B records, {input_mib:g} MiB input, 10% unique keys (MB/s of input;"
          " MB per CPU-second of the process)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        c = cleaner_bench.make_cleaner()
        figures: dict[str, list[float]] = {}
        for i in range(RUNS):
            for keys in ("sequential", "random"):
                for name in ("native", "python"):
                    if name == "native" and _native.core is None:
                        continue
                    d = root / f"b{i}{name}{keys}-0"
                    lg = cleaner_bench.build(d, 100, size, CompressionType.NONE,
                                             random_keys=keys == "random")
                    mb = lg.size_in_bytes / MiB
                    with python_core() if name == "python" else nullcontext():
                        secs, _r, _w, cpu = cleaner_bench.clean_round(c, lg)
                    figures.setdefault(f"{name}, {keys} keys", []).append(mb / secs)
                    figures.setdefault(f"{name}, {keys} keys, per CPU-s", []).append(mb / cpu)
                    figures.setdefault("plain copy", []).append(
                        mb / cleaner_bench.plain_copy(d, root / "copy"))
                    lg.close()
        copy = figures.pop("plain copy")
        for name, values in [*figures.items(), ("plain copy", copy)]:
            unit = "MB/CPU-s" if name.endswith("CPU-s") else "MB/s"
            print(f"  {name:<34} {rng(values, '{:.1f}'):>24} {unit}")


# -- 3. broker --------------------------------------------------------------------------------
def tansu_path() -> str | None:
    repo = Path(__file__).resolve().parents[1]
    cand = os.environ.get("TANSU") or str(repo.parent / "shared" / "bin" / "tansu")
    return cand if os.path.exists(cand) else None


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_figures(bootstrap: str, pid: int, size: int, n: int,
                    load: str) -> tuple[float, float]:
    """(records/s, broker CPU-s per million records) of one timed produce run; ``load`` is
    "librdkafka" (no Python per record) or "python" (confluent-kafka's produce() per record)."""
    topic = f"native-{size}-{time.monotonic_ns()}"
    broker_bench.produce(bootstrap, topic, 1000, size)  # topic creation + warm-up
    if load == "python":
        cpu0 = cpu_seconds(pid)
        secs = broker_bench.produce(bootstrap, topic, n, size)
        return n / secs, (cpu_seconds(pid) - cpu0) / n * 1e6
    value = os.urandom(size // 2).hex().encode()[:size]  # as broker_bench.produce makes it
    p = rdkafka_load.Producer(bootstrap, topic, 0,
                              {"acks": "1", "linger.ms": "5", "batch.size": "1000000"})
    try:
        p.produce(value, 10_000)  # the handle's own connection and metadata
        cpu0 = cpu_seconds(pid)
        secs = p.produce(value, n)
        return n / secs, (cpu_seconds(pid) - cpu0) / n * 1e6
    finally:
        p.close()


# (records, load) per record size: the librdkafka load is the figure; confluent-kafka's
# per-record Python call caps one producer near the brokers' own rates (section 3 above)
PRODUCE_LOADS = {100: [(1_500_000, "librdkafka"), (200_000, "python")],
                 1024: [(200_000, "librdkafka"), (50_000, "python")]}


def broker(runs: int = int(os.environ.get("BENCH_RUNS", "5"))) -> None:
    brokers: list[tuple[str, Callable[[], object]]] = [
        ("tidelog native", lambda: broker_bench.tidelog_broker(env={})),
        ("tidelog python", lambda: broker_bench.tidelog_broker(
            env={_native.PURE_PYTHON_ENV: "1"})),
    ]
    tansu = tansu_path()
    if tansu is not None:
        brokers.append(("tansu (baseline)", lambda: broker_bench.tansu_broker(tansu)))
    print("\n3. produce, one librdkafka producer, acks=1, linger.ms=5, one partition")
    results: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for _ in range(runs):  # interleaved, so the machine's noise falls on every broker alike
        for name, factory in brokers:
            with factory() as (bootstrap, pid):  # type: ignore[attr-defined]
                for size, loads in PRODUCE_LOADS.items():
                    for n, load in loads:
                        results.setdefault((name, size, load), []).append(
                            produce_figures(bootstrap, pid, size, n, load))
    for size, loads in PRODUCE_LOADS.items():
        for n, load in loads:
            print(f" {n:,} records of {size} B, load: {LOAD_NAMES[load]} ({runs} runs)")
            print_produce(results, [name for name, _ in brokers], size, load, tansu is not None)


LOAD_NAMES = {"librdkafka": "librdkafka via ctypes, rd_kafka_produce_batch (no Python per "
                            "record)",
              "python": "confluent-kafka produce() per record (client-bound)"}


def print_produce(results: dict[tuple[str, int, str], list[tuple[float, float]]],
                  names: list[str], size: int, load: str, with_tansu: bool) -> None:
    for name in names:
        rates = [r for r, _ in results[(name, size, load)]]
        cpus = [c for _, c in results[(name, size, load)]]
        print(f"  {name:<18} {rng(rates):>30} rec/s | broker CPU "
              f"{rng(cpus, '{:.3f}'):>20} s per M records")
    if with_tansu:
        base = results[("tansu (baseline)", size, load)]
        for name in names[:2]:
            mine = results[(name, size, load)]
            # run i of each broker ran back to back: pair them rather than cross every run
            rate = [a[0] / b[0] for a, b in zip(mine, base, strict=True)]
            cpu = [a[1] / b[1] for a, b in zip(mine, base, strict=True)]
            print(f"  {name + '/tansu':<24} rate {rng(rate, '{:.2f}')}x | "
                  f"CPU {rng(cpu, '{:.2f}')}x")


# -- 4. durable -------------------------------------------------------------------------------
def machine_busy() -> float:
    """CPU-seconds the whole machine spent busy so far (every CPU, /proc/stat, no idle or
    iowait): on a shared 2-core VM the other work shows here."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def produce_concurrently(bootstrap: str, topic: str, producers: int, total: int,
                         pid: int) -> tuple[float, float, float, float]:
    """``producers`` librdkafka handles (threads of this process; acks=all, linger.ms=1)
    deliver ``total`` records of 100 B to partition 0 between them: (records/s, broker
    CPU-s per million records, the load's own CPU-s per million, CPUs of the machine busy).
    Each handle is driven through bench/rdkafka_load.py (no Python per record): with
    confluent-kafka's produce() called per record, 64 threads shared one GIL and the load
    capped near 0.5 M records/s, fsync or not, at 0.2 .. 0.4 of a broker core."""
    import threading

    value = b"x" * 100
    clients = [rdkafka_load.Producer(bootstrap, topic, 0, {"acks": "all", "linger.ms": "1"})
               for _ in range(producers)]
    errors: list[Exception] = []

    def run(c: rdkafka_load.Producer) -> None:
        try:
            c.produce(value, total // producers)
        except RuntimeError as exc:  # undelivered records
            errors.append(exc)

    try:
        for c in clients:  # connect + metadata outside the timed region
            c.produce(value, 100)
        threads = [threading.Thread(target=run, args=(c,)) for c in clients]
        cpu0, own0, busy0 = cpu_seconds(pid), time.process_time(), machine_busy()
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        secs = time.perf_counter() - t
        cpu, own, busy = cpu_seconds(pid) - cpu0, time.process_time() - own0, (
            machine_busy() - busy0)
    finally:
        for c in clients:
            c.close()
    if errors:
        raise errors[0]
    return total / secs, cpu / total * 1e6, own / total * 1e6, busy / secs


def create_topic(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)


DURABLE_MODES: tuple[tuple[str, dict[str, str]], ...] = (
    ("fsync", {"flush.messages": "1"}), ("no fsync", {}))


def durable(runs: int = int(os.environ.get("BENCH_RUNS", "5")), total: int = 2_000_000) -> None:
    print(f"\n4. durable mode (flush.messages=1, group commit) vs no fsync, {total:,} records "
          f"of 100 B, acks=all, linger.ms=1, one partition; each run a fresh broker and log "
          f"dir holding both modes, which go first in turn ({runs} runs, log dir under "
          f"{os.environ.get('BENCH_DIR', tempfile.gettempdir())})")
    for core, env in (("native", {}), ("python", {_native.PURE_PYTHON_ENV: "1"})):
        if core == "native" and _native.core is None:
            continue
        for producers in (1, 8, 64):
            got: dict[str, list[tuple[float, float, float, float]]] = {"fsync": [],
                                                                        "no fsync": []}
            for r in range(runs):
                # A fresh broker per run keeps the page cache small (the files go with the
                # dir): a broker writing GBs into guest memory never touched before slows
                # its page-cache copy severalfold (section 3)
                with broker_bench.tidelog_broker(env=env) as (bootstrap, pid):
                    for mode, cfg in DURABLE_MODES[::1 if r % 2 == 0 else -1]:
                        topic = f"d-{mode[:2]}-{producers}-{r}"
                        create_topic(bootstrap, topic, cfg)
                        got[mode].append(
                            produce_concurrently(bootstrap, topic, producers, total, pid))
            print_durable(core, producers, got)


def print_durable(core: str, producers: int,
                  got: dict[str, list[tuple[float, float, float, float]]]) -> None:
    fsync, plain = got["fsync"], got["no fsync"]
    # run i of each mode ran back to back: pair them rather than cross every run
    ratio = [a[0] / b[0] for a, b in zip(fsync, plain, strict=True)]
    print(f"  {core:<6} {producers:>2} producers: ratio {rng(ratio, '{:.2f}')}")
    for mode, rows in got.items():
        print(f"    {mode:<8} {rng([x[0] for x in rows]):>34} rec/s | broker "
              f"{rng([x[1] for x in rows], '{:.3f}'):>21} CPU-s per M | load "
              f"{rng([x[2] for x in rows], '{:.2f}'):>18} CPU-s per M | machine busy "
              f"{rng([x[3] for x in rows], '{:.2f}')} CPUs")


# -- 5. recovery ------------------------------------------------------------------------------
def write_segment(d: Path, size: int, per_batch: int = 130) -> Path:
    """A segment of identical batches of ``per_batch`` ~125 B records (130: 16 KiB) at
    consecutive offsets (the base offset is outside the CRC, so one batch serves them all)."""
    b = RecordBatchBuilder(CompressionType.NONE)
    for i in range(per_batch):
        b.append(1_700_000_000_000 + i, b"key-%08d" % i, os.urandom(50).hex().encode())
    batch = bytearray(b.build())
    path = d / "00000000000000000000.log"
    with open(path, "wb") as f:
        offset = 0
        for _ in range(size // len(batch)):
            batch[0:8] = offset.to_bytes(8, "big")
            f.write(batch)
            offset += per_batch
    return path


def hot_read(path: Path) -> float:
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.read(MiB):
            pass
    return time.perf_counter() - t


def recover_once(d: Path) -> float:
    from tidelog.config.log_config import LogConfig
    from tidelog.storage.loader import open_segment
    from tidelog.util.clock import SystemClock

    for idx in list(d.glob("*.index")) + list(d.glob("*.timeindex")):
        idx.unlink()
    seg = open_segment(d, 0, LogConfig.from_props({}), SystemClock())
    t = time.perf_counter()
    truncated = seg.recover()
    secs = time.perf_counter() - t
    seg.close()
    assert truncated == 0
    return secs


def recovery(runs: int = 7, size: int = 256 * MiB) -> None:
    for per_batch in (130, 8):  # 16 KiB batches, then 1 KiB ones (more per-batch work)
        recovery_of(runs, size, per_batch)


def recovery_of(runs: int, size: int, per_batch: int) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        d = Path(tmp)
        path = write_segment(d, size, per_batch)
        print(f"\n5. unclean recovery of a {path.stat().st_size / MiB:.0f} MiB segment of "
              f"{per_batch}-record batches vs a hot read of it ({runs} runs, seconds)")
        reads = repeat(lambda: hot_read(path), runs)
        print(f"  hot read  {rng(reads, '{:.3f}'):>18} s")
        cores = ["python", "reference"] if _native.core is None else [
            "native", "python", "reference"]
        for core in cores:
            if core == "native":
                secs = repeat(lambda: recover_once(d), runs)
            elif core == "python":
                with python_core():
                    secs = repeat(lambda: recover_once(d), runs)
            else:
                with reference_recovery():
                    secs = repeat(lambda: recover_once(d), runs)
            ratio = [s / r for s in secs for r in reads]
            print(f"  {core:<9} {rng(secs, '{:.3f}'):>18} s | recovery/read "
                  f"{rng(ratio, '{:.1f}')}x")


def main() -> None:
    sections = sys.argv[1:] or ["loops", "cleaner", "broker", "durable", "recovery"]
    print(f"tidelog core: {_native.core_description}")
    for s in sections:
        {"loops": loops, "cleaner": cleaner, "broker": broker, "durable": durable,
         "recovery": recovery}[s]()


if __name__ == "__main__":
    main()
