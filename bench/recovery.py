"""Unclean recovery measured end to end on a real ``tidelog serve`` process.

One partition gets MIB MiB (default 256) in 16 KiB batches; the process is then stopped two
ways and each stopped state is kept:
  * unclean: SIGKILL, and the recovery-point checkpoint reset to 0, so every segment is
    recovered (each batch's header and CRC checked, indexes and producer state rebuilt);
  * clean: SIGTERM (the clean shutdown marker written).
Each repeat copies a kept state to a fresh dir, starts ``tidelog serve`` on it and times
until a ListOffsets (latest) answers the full end offset; and reads the same .log files once
with os.read (hot). Printed, in wall time and in CPU time (the broker's, and the reader's):
the unclean and clean starts, their difference (the recovery itself) and the read, each
median (min..max) over the repeats, and the ratio recovery / read (each repeat's difference
over the read of the same repeat; and the least disturbed repeat of each kind, which on a
loaded machine is the steadiest estimate of what the work itself costs). Where the wall time
goes: the broker's own log-loading time (its "Loaded N logs ... in X ms" line: the recovery
threads' part of the start) and the rest of the start (interpreter, imports, listeners).

    python bench/recovery.py [MIB] [REPEATS]
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tidelog.client.kafka_client import KafkaClient
from tidelog.records import CompressionType, build_batch
from tidelog.util.topic_partition import TopicPartition

MIB = 1 << 20
TOPIC = "recovery"
TP = TopicPartition(TOPIC, 0)
BATCH = 16 << 10
RECORD = 1000  # ~1 KiB records, 16 to a batch


def start(log_dir: Path) -> tuple[subprocess.Popen[str], int, float]:
    """``tidelog serve`` on an ephemeral port; returns once it logs that it listens, with
    the seconds it says loading the logs took. Its bytecode is cached beside the data (as an
    installed package's is), so the first start (the fill) compiles and the timed ones
    measure the broker, not the compiler."""
    cmd = [sys.executable, "-m", "tidelog.cli.main", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={log_dir}"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONUNBUFFERED": "1", "PYTHONPYCACHEPREFIX": str(log_dir.parent / "pycache")}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    loading = float("nan")
    for line in proc.stderr:
        if " logs from " in line and line.rstrip().endswith(" ms"):  # "Loaded N logs ..."
            loading = float(line.rstrip().rsplit(" ", 2)[1]) / 1000
        if "listening on" in line:
            port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
            # keep draining stderr so the process never blocks on a full pipe
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, port, loading
    raise RuntimeError(f"tidelog serve exited with {proc.wait()}")


def fill(log_dir: Path, total: int) -> int:
    """Produce ``total`` bytes in 16 KiB batches; returns the end offset."""
    proc, port, _ = start(log_dir)
    try:
        with KafkaClient(f"127.0.0.1:{port}") as c:
            c.create_topics({TOPIC: 1})
            value = os.urandom(RECORD // 2).hex().encode()
            per = max(1, BATCH // (RECORD + 20))
            batch = build_batch([(1_700_000_000_000, b"k", value)] * per, CompressionType.NONE)
            end = 0
            for _ in range(total // len(batch)):
                c.produce(c.leader_for(TP), {TP: batch}, acks=1)
                end += per
            return end
    finally:
        proc.kill()
        proc.wait()


def keep_unclean(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    (dst / ".kafka_cleanshutdown").unlink(missing_ok=True)
    rp = dst / "recovery-point-offset-checkpoint"
    if rp.exists():  # version, count, then "topic partition offset" lines: all to 0
        lines = rp.read_text().splitlines()
        body = [" ".join([*ln.split()[:2], "0"]) for ln in lines[2:]]
        rp.write_text("\n".join([*lines[:2], *body]) + "\n")


def keep_clean(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    proc, _, _ = start(dst)  # load (recovering), then a clean shutdown
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    assert (dst / ".kafka_cleanshutdown").exists(), "no clean shutdown marker"


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process used so far (Linux /proc): a figure the machine's other
    load moves far less than wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_start(kept: Path, work: Path, end: int) -> tuple[float, float, float]:
    """(wall seconds, the broker's CPU seconds, the wall seconds it says loading the logs
    took) until ListOffsets answers ``end``."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(kept, work)
    t0 = time.perf_counter()
    proc, port, loading = start(work)
    try:
        with KafkaClient(f"127.0.0.1:{port}", retry_backoff_ms=1) as c:
            while True:
                got = c.list_offsets({TP: -1}).get(TP, (-1, -1))[0]
                if got == end:
                    return time.perf_counter() - t0, cpu_seconds(proc.pid), loading
                if got > end:
                    raise AssertionError(f"end offset {got} > {end}")
    finally:
        proc.kill()
        proc.wait()


def timed_read(log_dir: Path) -> tuple[float, float, float]:
    """(wall, CPU, wall) seconds of one os.read pass over the .log files."""
    t0, c0 = time.perf_counter(), time.process_time()
    for p in sorted(log_dir.rglob("*.log")):
        fd = os.open(p, os.O_RDONLY)
        try:
            while os.read(fd, MIB):
                pass
        finally:
            os.close(fd)
    wall = time.perf_counter() - t0
    return wall, time.process_time() - c0, wall


def span(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.3f} s ({min(xs):.3f}..{max(xs):.3f})"


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    root = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    try:
        end = fill(root / "filled", mib * MIB)
        keep_unclean(root / "filled", root / "unclean")
        keep_clean(root / "filled", root / "clean")
        print(f"{mib} MiB, {end} records in 16 KiB batches, one partition; "
              f"load {os.getloadavg()[0]:.2f}; median (min..max) of {repeats}")
        runs: list[tuple[tuple[float, float, float], ...]] = []
        for _ in range(repeats):  # alternating, in one sitting
            runs.append((timed_start(root / "unclean", root / "work", end),
                         timed_start(root / "clean", root / "work", end),
                         timed_read(root / "unclean")))
        for i, what in enumerate(("wall", "cpu", "loading logs (wall)")):
            u, c, r = ([run[k][i] for run in runs] for k in range(3))
            ratio = [(a - b) / max(x, 1e-6) for a, b, x in zip(u, c, r, strict=True)]
            print(f"{what}: unclean start {span(u)}  clean start {span(c)}")
            print(f"{what}: recovery (u-c) {span([a - b for a, b in zip(u, c, strict=True)])}"
                  f"  plain read {span(r)}  ratio {statistics.median(ratio):.1f}x "
                  f"({min(ratio):.1f}..{max(ratio):.1f})")
            best = (min(u) - min(c)) / max(min(r), 1e-6)  # each kind's least disturbed repeat
            print(f"{what}: least disturbed: unclean {min(u):.3f} s - clean {min(c):.3f} s "
                  f"over read {min(r):.3f} s = {best:.1f}x")
        rest = [(run[k][0] - run[k][2]) for run in runs for k in (0, 1)]
        print(f"the rest of a start (wall minus loading the logs, both kinds) {span(rest)}; "
              f"load {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
