"""Log cleaner throughput: MB/s of input cleaned, next to baselines measured in the same run.

For 100 B and 1 KiB records with 10% unique keys (so ~90% of the input is superseded), build
a compacted log on disk (batches of 50 records, uncompressed and lz4), then time one full
cleaning round (offset map + filtering + writing `.cleaned` + swap). Baselines on the same
bytes in the same run:

* plain copy: read the segment files and write them to a new file (+ fsync), i.e. the I/O
  floor of any rewrite;
* decode: iterate every batch and decode every record in pure Python (what any per-record
  Python pass costs, without hashing or writing).

Usage: python bench/cleaner.py [input_MiB]   (default 16)
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatchBuilder, iter_batches
from tidelog.storage.cleaner.cleaner import Cleaner, LogToClean
from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap
from tidelog.storage.cleaner.throttler import Throttler
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

NOW = 1_700_000_000_000
BATCH = 50
MiB = 1024 * 1024


def build(d: Path, record_size: int, input_bytes: int, codec: CompressionType,
          random_keys: bool = False) -> Log:
    """Keys ``j % unique`` (each batch ends up wholly live or wholly superseded), or with
    ``random_keys`` drawn at random from as many (at 100 B, 44% of the batches keep some of
    their records and are re-written, 55% none)."""
    cfg = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": str(1 << 30)})
    lg = Log.open(d, cfg, clock=ManualClock(NOW))
    n = max(BATCH, input_bytes // (record_size + 20))
    unique = max(1, n // 10)
    rnd = random.Random(n)
    i = 0
    while i < n:
        b = RecordBatchBuilder(codec)
        for j in range(i, min(i + BATCH, n)):
            # Hex text values: distinct per record and ~2x compressible, like typical payloads.
            value = os.urandom((record_size - 12) // 2).hex().encode()
            key = rnd.randrange(unique) if random_keys else j % unique
            b.append(NOW + j, b"key-%08d" % key, value)
        lg.append_as_leader(b.build())
        i += BATCH
    lg.roll()
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return lg


def plain_copy(src: Path, dst: Path) -> float:
    t = time.perf_counter()
    with open(dst, "wb") as out:
        for f in sorted(src.glob("*.log")):
            with open(f, "rb") as inp:
                shutil.copyfileobj(inp, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    return time.perf_counter() - t


def decode_all(src: Path) -> float:
    t = time.perf_counter()
    n = 0
    for f in sorted(src.glob("*.log")):
        for batch in iter_batches(f.read_bytes()):
            for _r in batch.iter_records():
                n += 1
    return time.perf_counter() - t


def make_cleaner() -> Cleaner:
    """Kafka's defaults for one thread: a 128 MiB offset map (allocated once per cleaner
    thread, so outside the timed round), 512 KiB of I/O buffer."""
    clock = ManualClock(NOW)
    offset_map = SkimpyOffsetMap(128 * MiB)
    offset_map.prefault()
    return Cleaner(0, offset_map, dup_buffer_load_factor=0.9,
                   io_buffer_size=256 * 1024, throttler=Throttler(float("inf"), clock),
                   clock=clock)


def clean_round(cleaner: Cleaner, lg: Log) -> tuple[float, int, int, float]:
    """(wall seconds, bytes read, bytes written, CPU seconds of the process) of one round."""
    ltc = LogToClean(lg.topic_partition, lg, 0, lg.active_segment.base_offset)
    t, cpu = time.perf_counter(), time.process_time()
    _end, stats = cleaner.clean(ltc)
    return (time.perf_counter() - t, stats.bytes_read, stats.bytes_written,
            time.process_time() - cpu)


def run(cleaner: Cleaner, record_size: int, codec: CompressionType, input_bytes: int,
        root: Path) -> None:
    d = root / f"bench{record_size}{codec.label}-0"
    lg = build(d, record_size, input_bytes, codec)
    size = lg.size_in_bytes
    copy_s = plain_copy(d, root / "copy.bin")
    decode_s = decode_all(d)
    clean_s, read, written, _cpu = clean_round(cleaner, lg)
    lg.close()
    mb = size / MiB
    print(f"{record_size:>5} B  {codec.label:<5} input {mb:6.1f} MiB -> {written / MiB:5.1f} MiB"
          f" | clean {mb / clean_s:7.1f} MB/s | plain copy {mb / copy_s:7.1f} MB/s"
          f" | decode-only {mb / decode_s:6.1f} MB/s | clean/copy {copy_s / clean_s:.3f}")
    assert read == size
    shutil.rmtree(d)


def main() -> None:
    input_bytes = int(float(sys.argv[1]) * MiB) if len(sys.argv) > 1 else 16 * MiB
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("Log cleaner, 10% unique keys, batches of 50 records (MB = MiB of input/s)")
        cleaner = make_cleaner()
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            for size in (100, 1024):
                run(cleaner, size, codec, input_bytes, root)


if __name__ == "__main__":
    main()
