"""LogManager startup time with 1,000 partitions, next to listing and stat-ing the same files.

Builds N partitions (a few batches each, two segments), shuts down cleanly, then times:
  * clean startup (marker present: no segment is recovered),
  * unclean startup with the recovery-point checkpoint (marker removed),
  * unclean startup without any recovery checkpoint (every segment recovered from 0),
and, as the same-run baseline, the time to list every partition dir and stat every file in it.
Each figure is the best (and median) of RUNS runs. Usage: python bench/manager.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tidelog.records.builder import build_batch
from tidelog.storage.manager import LogManager
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

RUNS = 3
BATCHES = 8
RECORDS_PER_BATCH = 10
TOPIC_CONFIG = {"segment.bytes": str(4 * 1024)}  # ~8 KiB of data per partition: 2+ segments


def new_manager(root: Path, threads: int = 1) -> LogManager:
    clock = ManualClock()
    cfg = LogManagerConfig.from_props({"num.recovery.threads.per.data.dir": str(threads)})
    return LogManager(
        [root], TOPIC_CONFIG, clock=clock, scheduler=ManualScheduler(clock), config=cfg
    )


def build(root: Path, partitions: int) -> int:
    m = new_manager(root)
    m.startup()
    value = b"x" * 80
    for p in range(partitions):
        lg = m.get_or_create_log(TopicPartition("bench", p))
        for b in range(BATCHES):
            recs = [(1_700_000_000_000 + i, b"key-%d" % i, value) for i in range(RECORDS_PER_BATCH)]
            lg.append_as_leader(build_batch(recs))
            del b
    segments = sum(len(lg.segments) for lg in m.all_logs())
    m.shutdown()
    return segments


def list_and_stat(root: Path) -> int:
    n = 0
    with os.scandir(root) as top:
        for entry in top:
            if entry.is_dir():
                with os.scandir(entry.path) as files:
                    for f in files:
                        os.stat(f.path)
                        n += 1
    return n


def time_startup(root: Path, prepare: Callable[[], None], threads: int = 1) -> list[float]:
    times = []
    for _ in range(RUNS):
        prepare()
        t0 = time.perf_counter()
        m = new_manager(root, threads)
        m.startup()
        times.append(time.perf_counter() - t0)
        m.shutdown()
    return times


def main() -> None:
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-manager-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        segments = build(root, partitions)
        print(
            f"built {partitions} partitions, {segments} segments in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        marker = root / ".kafka_cleanshutdown"
        rp = root / "recovery-point-offset-checkpoint"

        def nothing() -> None:
            return None

        def crash_keep_checkpoint() -> None:
            marker.unlink(missing_ok=True)

        def crash_no_checkpoint() -> None:
            marker.unlink(missing_ok=True)
            rp.unlink(missing_ok=True)

        files = list_and_stat(root)
        base = []
        for _ in range(RUNS):
            t = time.perf_counter()
            list_and_stat(root)
            base.append(time.perf_counter() - t)
        rows = [
            ("baseline: list + stat", base),
            ("clean startup", time_startup(root, nothing)),
            ("unclean, recovery points checkpointed", time_startup(root, crash_keep_checkpoint)),
            ("unclean, no recovery checkpoint (1 thread)", time_startup(root, crash_no_checkpoint)),
            (
                "unclean, no recovery checkpoint (4 threads)",
                time_startup(root, crash_no_checkpoint, threads=4),
            ),
        ]
        b = min(base)
        print(f"{partitions} partitions, {files} files; best of {RUNS} (median)")
        for name, ts in rows:
            best = min(ts)
            print(
                f"  {name:<46} {best * 1000:9.1f} ms ({statistics.median(ts) * 1000:9.1f})"
                f"  x{best / b:8.1f} baseline  {best / partitions * 1e6:8.0f} us/partition"
            )


if __name__ == "__main__":
    main()
