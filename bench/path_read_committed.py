"""Path-mode read_committed against read_uncommitted, on what one Spark task runs (log dir
-> storage/reader.py -> Arrow), without Spark around it, in the same run.

Three partitions in Kafka's layout (1000 records of 100 bytes per batch unless --per-batch,
64 MiB segments):
  * plain: no producer ids at all (the common case), no producer snapshot, so the LSO scan
    reads the whole log from its start;
  * plain+snapshot: the same with a producer snapshot at the last segment's base (what a
    broker leaves at each roll), so the scan covers the last segment only;
  * txn: every batch transactional, one producer, transactions of 4 batches ended by a
    marker, every other one aborted.
Figures: min..max rows/s (of the rows each isolation level returns) over RUNS runs after one
warm-up, and the ratio of the best read_committed run to the best read_uncommitted run.

    .venv/bin/python bench/path_read_committed.py [--records 2000000] [--per-batch 1000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "spark"))

from kafka_layout import PartitionWriter

from tidelog.records import RecordBatch, RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.spark.arrow import batches_to_arrow
from tidelog.storage.producer_state import snapshot_file_name, write_snapshot
from tidelog.storage.reader import PartitionReader

RUNS = 5
PER_BATCH = 1000
TS0 = 1_700_000_000_000


def _batch(n: int, pid: int, per_batch: int) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=pid >= 0)
    for i in range(per_batch):
        b.append(TS0 + i, None, (b"%08d" % (n + i)) * 12 + b"....")
    return b.build()


def _marker(kind: ControlRecordType) -> bytes:
    b = RecordBatchBuilder(producer_id=7, producer_epoch=0, is_transactional=True, is_control=True)
    b.append_control(kind, TS0)
    return b.build()


def write(d: Path, records: int, per_batch: int, *, txn: bool, snapshot: bool) -> None:
    w = PartitionWriter(d, segment_bytes=64 << 20)
    for k, n in enumerate(range(0, records, per_batch)):
        w.append_batch(_batch(n, 7 if txn else -1, per_batch))
        if txn and k % 4 == 3:
            w.append_batch(_marker(ControlRecordType.ABORT if k % 8 == 3 else ControlRecordType.COMMIT))
    w.flush()
    if snapshot:
        write_snapshot(d / snapshot_file_name(w.segments[-1].base), [])


def rows(batches: Iterator[RecordBatch]) -> int:
    return sum(b.num_rows for b in batches_to_arrow(batches, topic="t", partition=0, start=0,
                                                    end=1 << 62, include_headers=False))


def timed(fn: Callable[[], int]) -> tuple[int, list[float]]:
    n = fn()  # warm-up (page cache, imports)
    rates = []
    for _ in range(RUNS):
        t = time.perf_counter()
        fn()
        rates.append(n / (time.perf_counter() - t))
    return n, rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--per-batch", type=int, default=PER_BATCH)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-rc-"))
    try:
        for name, txn, snap in (("plain", False, False), ("plain+snapshot", False, True), ("txn", True, False)):
            d = root / name.replace("+", "_") / "t-0"
            write(d, args.records, args.per_batch, txn=txn, snapshot=snap)
            r = PartitionReader(d)
            nu, unc = timed(lambda r=r: rows(r.read_batches(0)))
            nc, com = timed(lambda r=r: rows(r.read_committed_batches(0)))
            print(f"{name:15} read_uncommitted {nu:>8} rows {min(unc):>12,.0f}..{max(unc):>12,.0f} rows/s | "
                  f"read_committed {nc:>8} rows {min(com):>12,.0f}..{max(com):>12,.0f} rows/s | "
                  f"best committed / best uncommitted {max(com) / max(unc):.2f}x")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
