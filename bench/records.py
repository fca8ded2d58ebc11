"""Validate + iterate throughput of tidelog.records, next to raw CRC32C over the same bytes.

Prints MB/s (of batch bytes) and records/s for 100 B and 1 KiB values, uncompressed and lz4,
as min..max over repeated runs after a warm-up, and the ratio to CRC32C's speed measured in
the same run (validation is bounded by the CRC; iteration by Python's per-record work).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tidelog.records import CompressionType, RecordBatchBuilder, crc32c, iter_batches

TOTAL_BYTES = 16 * 1024 * 1024
BATCH_BYTES = 16 * 1024
RUNS = 5


def make_log(value_size: int, codec: CompressionType) -> tuple[bytes, int]:
    out, offset, n = bytearray(), 0, 0
    value = os.urandom(value_size // 2).hex().encode()[:value_size]
    per_batch = max(1, BATCH_BYTES // (value_size + 20))
    while len(out) < TOTAL_BYTES:
        b = RecordBatchBuilder(codec, base_offset=offset)
        for i in range(per_batch):
            b.append(1_700_000_000_000 + i, f"key-{offset + i}".encode(), value)
        out += b.build()
        offset += per_batch
        n += per_batch
    return bytes(out), n


def timed(fn: Callable[[], object]) -> list[float]:
    fn()  # warm-up
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def validate_only(data: bytes) -> None:
    for _batch in iter_batches(data):
        pass  # iter_batches validates every CRC


def validate_and_iterate(data: bytes) -> None:
    for batch in iter_batches(data):
        for _rec in batch:
            pass


def rng(values: list[float]) -> str:
    return f"{min(values):9.1f} .. {max(values):9.1f}"


def main() -> None:
    print(f"{'case':<28} {'MB/s':>22} {'records/s':>26}  vs CRC32C")
    for value_size in (100, 1024):
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            data, n = make_log(value_size, codec)
            mb = len(data) / 1e6
            crc_t = timed(lambda d=data: crc32c(d))
            crc_best = mb / min(crc_t)
            for label, fn in (("validate", validate_only), ("validate+iterate", validate_and_iterate)):
                ts = timed(lambda d=data, f=fn: f(d))
                mbs = [mb / t for t in ts]
                rps = [n / t for t in ts]
                name = f"{value_size}B {codec.label} {label}"
                print(f"{name:<28} {rng(mbs):>22} {rng(rps):>26}  {max(mbs) / crc_best:6.3f}x")
            print(f"{f'{value_size}B {codec.label} raw crc32c':<28} {rng([mb / t for t in crc_t]):>22}")


if __name__ == "__main__":
    main()
