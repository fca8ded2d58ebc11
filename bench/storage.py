"""Segment-level storage throughput, each figure next to a raw-syscall baseline of the same run.

* append: LogSegment.append of 16 KiB batches (sparse index every index.interval.bytes)
  vs os.write of the same 16 KiB buffers to a plain file;
* read: LogSegment.read (index lookup + header scan + FileSlice.read) of one 16 KiB batch at a
  time, and of 1 MiB fetches, vs os.read of the same sizes;
* recover: LogSegment.recover() (CRC of every batch, index rebuild) in s/GiB vs reading the
  same file with os.read in 1 MiB chunks.

Files live in the page cache (each file is read once before timing), so the figures are
the CPU cost of our code on top of the syscalls. Usage: python bench/storage.py [MiB]
(default 128). Prints min..max over RUNS runs after a warm-up.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tidelog.records import RecordBatchBuilder
from tidelog.storage.segment import LogSegment, SegmentConfig
from tidelog.util.clock import SystemClock

BATCH_BYTES = 16 * 1024
FETCH_BYTES = 1024 * 1024
RUNS = 3
MIB = 1024 * 1024


def make_batches(total: int) -> list[tuple[bytes, int, int]]:
    """(batch bytes, last offset, max timestamp) for ~total bytes of 16 KiB batches."""
    template = RecordBatchBuilder()
    value = os.urandom(1000 // 2).hex().encode()
    n_records = 0
    while True:  # fill one batch as close to 16 KiB as possible
        template.append(1_700_000_000_000 + n_records, f"key-{n_records}".encode(), value)
        n_records += 1
        if len(template.build()) + 1100 > BATCH_BYTES:
            break
    proto = bytearray(template.build())
    out, offset = [], 0
    while len(out) * len(proto) < total:
        struct.pack_into(">q", proto, 0, offset)  # base offset: outside the CRC
        out.append((bytes(proto), offset + n_records - 1, 1_700_000_000_000 + n_records - 1))
        offset += n_records
    return out


def timed(fn: Callable[[], object]) -> list[float]:
    fn()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def rate(nbytes: int, times: list[float]) -> str:
    return f"{nbytes / max(times) / MIB:8.0f}..{nbytes / min(times) / MIB:<6.0f} MB/s"


def bench_append(root: Path, batches: list[tuple[bytes, int, int]], total: int) -> None:
    cfg = SegmentConfig()

    def ours() -> None:
        d = Path(tempfile.mkdtemp(dir=root))
        seg = LogSegment.open(d, 0, cfg, SystemClock())
        for data, last, ts in batches:
            seg.append(last, ts, last, data)
        seg.close()
        shutil.rmtree(d)

    def raw() -> None:
        d = Path(tempfile.mkdtemp(dir=root))
        fd = os.open(d / "raw.log", os.O_WRONLY | os.O_CREAT, 0o644)
        for data, _last, _ts in batches:
            os.write(fd, data)
        os.close(fd)
        shutil.rmtree(d)

    t_ours, t_raw = timed(ours), timed(raw)
    print(f"append 16 KiB batches   LogSegment.append {rate(total, t_ours)}   "
          f"os.write {rate(total, t_raw)}   ratio {min(t_raw) / min(t_ours):.2f}")


def bench_read(seg: LogSegment, batches: list[tuple[bytes, int, int]], total: int) -> None:
    path = seg.log.path
    for size, label in ((BATCH_BYTES, "16 KiB batch"), (FETCH_BYTES, "1 MiB fetch ")):

        def ours(size: int = size) -> None:
            offset, end = 0, batches[-1][1] + 1
            while offset < end:
                info = seg.read(offset, size)
                assert info is not None
                data = info.records.read()
                # next offset = last offset of the last complete batch + 1 (header only)
                pos = 0
                while pos + 61 <= len(data):
                    blen = struct.unpack_from(">i", data, pos + 8)[0] + 12
                    if pos + blen > len(data):
                        break
                    offset = struct.unpack_from(">q", data, pos)[0] + struct.unpack_from(">i", data, pos + 23)[0] + 1
                    pos += blen

        def raw(size: int = size) -> None:
            fd = os.open(path, os.O_RDONLY)
            chunk = len(batches[0][0]) if size == BATCH_BYTES else size
            while os.read(fd, chunk):
                pass
            os.close(fd)

        t_ours, t_raw = timed(ours), timed(raw)
        print(f"read {label}       LogSegment.read   {rate(total, t_ours)}   "
              f"os.read  {rate(total, t_raw)}   ratio {min(t_raw) / min(t_ours):.2f}")


def bench_recover(seg: LogSegment, total: int) -> None:
    path = seg.log.path

    def raw() -> None:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, FETCH_BYTES):
            pass
        os.close(fd)

    t_ours, t_raw = timed(lambda: seg.recover()), timed(raw)
    gib = total / (1024 * MIB)
    print(f"recover                 LogSegment.recover {min(t_ours) / gib:6.2f}..{max(t_ours) / gib:<5.2f} s/GiB"
          f"   os.read {min(t_raw) / gib:5.2f}..{max(t_raw) / gib:<5.2f} s/GiB"
          f"   ratio {min(t_ours) / min(t_raw):.1f}x the read time")


def main() -> None:
    total = int(sys.argv[1]) * MIB if len(sys.argv) > 1 else 128 * MIB
    batches = make_batches(total)
    total = sum(len(b[0]) for b in batches)
    print(f"{len(batches)} batches of {len(batches[0][0])} B ({total / MIB:.0f} MiB), "
          f"best..worst of {RUNS} runs after a warm-up")
    root = Path(tempfile.mkdtemp(prefix="tidelog-bench-"))
    try:
        bench_append(root, batches, total)
        seg = LogSegment.open(root, 0, SegmentConfig(), SystemClock())
        for data, last, ts in batches:
            seg.append(last, ts, last, data)
        seg.flush()
        bench_read(seg, batches, total)
        bench_recover(seg, total)
        seg.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
