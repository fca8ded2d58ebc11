"""Log-level throughput (validation + offset assignment + producer state + segment append),
each figure next to a raw-syscall baseline measured in the same run.

* append: Log.append_as_leader of 16 KiB client batches (base offset 0, as producers send
  them) with ~1 KiB records, with ~100 B records, and idempotent (~100 B records) vs
  os.write of the same buffers to a plain file;
* read: Log.read of 1 MiB fetches (HW isolation) + FileSlice.read vs os.read of 1 MiB;
* recover: Log.open after an unclean shutdown with recovery point 0 (every segment CRC
  checked, indexes and producer state rebuilt) in s/GiB vs reading the files with os.read
  (hot), median and range of alternating runs, for 16 KiB batches, 1 KiB (one-record)
  batches and one-record batches of ~90 B (also in batches/s).

Files stay in the page cache: figures are our CPU cost on top of the syscalls.
Usage: python bench/log.py [MiB] (default 64). Prints min..max over RUNS runs.
"""

from __future__ import annotations

import os
import shutil
import statistics
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


def batches_of(total: int, record_bytes: int) -> list[bytes]:
    """~total bytes of one-record batches with their offsets, ~1 MiB per follower append
    (one template; the base offset is outside the CRC)."""
    value = os.urandom(record_bytes // 2).hex().encode()
    b = RecordBatchBuilder()
    b.append(1_700_000_000_000, b"key", value)
    raw = b.build()
    group = max(1, MIB // len(raw))
    out, offset = [], 0
    for _ in range(max(1, total // (len(raw) * group))):
        chunk = bytearray(raw * group)
        for i in range(group):
            chunk[i * len(raw):i * len(raw) + 8] = offset.to_bytes(8, "big")
            offset += 1
        out.append(bytes(chunk))
    return out


def bench_recover(root: Path, label: str, batches: list[bytes], follower: bool = False) -> None:
    lg = fresh_log(root)
    for b in batches:
        lg.append_as_follower(b) if follower else lg.append_as_leader(b)
    lg.close()
    count = sum(1 for _ in _batch_sizes(batches))
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

    t_ours, t_raw = [], []
    for _ in range(RUNS):  # alternating, each after its own warm-up run
        t_ours += timed(lambda: None, ours)[-1:]
        t_raw += timed(lambda: None, raw)[-1:]
    med_o, med_r = statistics.median(t_ours), statistics.median(t_raw)
    print(f"recover {label:<22} Log.open {med_o / gib:6.2f} s/GiB ({min(t_ours) / gib:.2f}.."
          f"{max(t_ours) / gib:.2f})  hot os.read {med_r / gib:6.3f} s/GiB  ratio "
          f"{med_o / med_r:5.2f}x ({min(t_ours) / max(t_raw):.2f}..{max(t_ours) / min(t_raw):.2f})  "
          f"{count / med_o / 1e6:.2f} M batches/s")


def _batch_sizes(batches: list[bytes]) -> list[int]:
    out = []
    for data in batches:
        pos = 0
        while pos + 61 <= len(data):
            size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            out.append(size)
            pos += size
    return out


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
        bench_recover(root, "(16 KiB batches)", big)
        bench_recover(root, "(1 KiB batches)", batches_of(total, 1000), True)
        bench_recover(root, "(one-record, ~90 B)", batches_of(total, 20), True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "recover":
        _mib = int(sys.argv[1]) * MIB
        _root = Path(tempfile.mkdtemp(prefix="bench-log-"))
        try:
            bench_recover(_root, "(16 KiB batches)", client_batches(_mib, 1000))
            bench_recover(_root, "(1 KiB batches)", batches_of(_mib, 1000), True)
            bench_recover(_root, "(one-record, ~90 B)", batches_of(_mib, 20), True)
        finally:
            shutil.rmtree(_root, ignore_errors=True)
        sys.exit(0)
    main()
