"""Log-level throughput (validation + offset assignment + producer state + segment append),
each figure next to a raw-syscall baseline measured in the same run.

* append: Log.append_as_leader of 16 KiB client batches (base offset 0, as producers send
  them) with ~1 KiB records, with ~100 B records, and idempotent (~100 B records) vs
  os.write of the same buffers to a plain file;
* read: Log.read of 1 MiB fetches (HW isolation) + FileSlice.read vs os.read of 1 MiB;
* recover: Log.open after an unclean shutdown with recovery point 0 (every segment CRC
  checked, indexes and producer state rebuilt) in s/GiB vs reading the files with os.read.

Files stay in the page cache: figures are our CPU cost on top of the syscalls.
Usage: python bench/log.py [MiB] (default 64). Prints min..max over RUNS runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatchBuilder
from tidelog.storage.log import Log
from tidelog.util.clock import SystemClock

BATCH_BYTES = 16 * 1024
MIB = 1024 * 1024
RUNS = 3
CONFIG = LogConfig.from_props({"segment.bytes": str(64 * MIB)})


def client_batches(total: int, record_bytes: int, idempotent: bool = False) -> list[bytes]:
    """~total bytes of 16 KiB client batches (base offset 0; sequences if idempotent)."""
    value = os.urandom(record_bytes // 2).hex().encode()
    out: list[bytes] = []
    seq = 0
    size = 0
    while size < total:
        kw = {"producer_id": 1, "producer_epoch": 0, "base_sequence": seq} if idempotent else {}
        b = RecordBatchBuilder(**kw)  # type: ignore[arg-type]
        n = 0
        while True:
            b.append(1_700_000_000_000 + n, b"key-%d" % n, value)
            n += 1
            if len(b.build()) + record_bytes + 30 > BATCH_BYTES:
                break
        data = b.build()
        out.append(data)
        size += len(data)
        seq += n
    return out


def timed(setup: Callable[[], object], fn: Callable[[object], object]) -> list[float]:
    times = []
    for _ in range(RUNS + 1):
        state = setup()
        t0 = time.perf_counter()
        fn(state)
        times.append(time.perf_counter() - t0)
    return times[1:]  # the first run warms up


def rate(nbytes: int, times: list[float]) -> str:
    return f"{nbytes / max(times) / MIB:7.1f}..{nbytes / min(times) / MIB:<7.1f} MB/s"


def fresh_log(root: Path) -> Log:
    d = root / "bench-0"
    shutil.rmtree(d, ignore_errors=True)
    return Log.open(d, CONFIG, clock=SystemClock())


def bench_append(root: Path, label: str, batches: list[bytes]) -> None:
    total = sum(map(len, batches))

    def ours(lg: object) -> None:
        assert isinstance(lg, Log)
        for b in batches:
            lg.append_as_leader(b)
        lg.close()

    def raw_setup() -> int:
        return os.open(root / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def raw(fd: object) -> None:
        assert isinstance(fd, int)
        for b in batches:
            os.write(fd, b)
        os.close(fd)

    t_ours = timed(lambda: fresh_log(root), ours)
    t_raw = timed(raw_setup, raw)
    print(f"append {label:<24} Log.append_as_leader {rate(total, t_ours)}  "
          f"os.write {rate(total, t_raw)}  ratio {min(t_raw) / min(t_ours):.2f}")


def bench_read(root: Path, batches: list[bytes]) -> None:
    lg = fresh_log(root)
    for b in batches:
        lg.append_as_leader(b)
    lg.update_high_watermark(lg.log_end_offset)
    total = lg.size_in_bytes
    raw_path = root / "raw.bin"
    raw_path.write_bytes(b"".join(batches))

    def ours(_: object) -> None:
        pos = 0
        while pos < lg.log_end_offset:
            info = lg.read(pos, MIB)
            data = info.records.read()
            pos = _next_offset(data)

    def raw(_: object) -> None:
        fd = os.open(raw_path, os.O_RDONLY)
        while os.read(fd, MIB):
            pass
        os.close(fd)

    t_ours = timed(lambda: None, ours)
    t_raw = timed(lambda: None, raw)
    print(f"read 1 MiB fetches              Log.read+slice.read  {rate(total, t_ours)}  "
          f"os.read  {rate(total, t_raw)}  ratio {min(t_raw) / min(t_ours):.2f}")
    lg.close()


def _next_offset(data: bytes) -> int:
    """Offset after the last complete batch in ``data`` (header walk only)."""
    pos, nxt = 0, 0
    while pos + 61 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + size > len(data):
            break
        base = int.from_bytes(data[pos:pos + 8], "big")
        nxt = base + int.from_bytes(data[pos + 23:pos + 27], "big") + 1
        pos += size
    return nxt


def bench_recover(root: Path, batches: list[bytes]) -> None:
    lg = fresh_log(root)
    for b in batches:
        lg.append_as_leader(b)
    lg.close()
    total = sum(p.stat().st_size for p in lg.dir.glob("*.log"))
    gib = total / (1024 * MIB)

    def ours(_: object) -> None:
        for p in lg.dir.glob("*.snapshot"):
            p.unlink()
        Log.open(lg.dir, CONFIG, clock=SystemClock(), recovery_point=0).close()

    def raw(_: object) -> None:
        for p in sorted(lg.dir.glob("*.log")):
            fd = os.open(p, os.O_RDONLY)
            while os.read(fd, MIB):
                pass
            os.close(fd)

    t_ours = timed(lambda: None, ours)
    t_raw = timed(lambda: None, raw)
    print(f"recover (unclean, rp=0)         Log.open {min(t_ours) / gib:6.2f}..{max(t_ours) / gib:<6.2f}"
          f" s/GiB   os.read {min(t_raw) / gib:6.3f}..{max(t_raw) / gib:<6.3f} s/GiB")


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    total = mib * MIB
    root = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        big = client_batches(total, 1000)
        small = client_batches(total, 100)
        idem = client_batches(total, 100, idempotent=True)
        print(f"{mib} MiB per run, batches of ~{len(big[0])} B; min..max of {RUNS} runs")
        bench_append(root, "(~1 KiB records)", big)
        bench_append(root, "(~100 B records)", small)
        bench_append(root, "(idempotent, ~100 B)", idem)
        bench_read(root, big)
        bench_recover(root, big)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
