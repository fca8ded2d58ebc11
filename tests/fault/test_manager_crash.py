"""kill -9 of a real process in the middle of appends, then restart: nothing acked is lost.

The child runs a LogManager (real threads, SystemClock), appends one-to-three-record batches
whose values are derived from their offsets, flushes every few appends and acknowledges each
flushed offset over a pipe. The parent SIGKILLs it mid-stream, restarts a LogManager on the
same dir (an unclean start: no marker) and reads back every acknowledged record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tidelog.records.batch import iter_batches
from tidelog.records.builder import build_batch
from tidelog.storage.checkpoints import CleanShutdownFile
from tidelog.storage.manager import LogManager
from tidelog.storage.segment import LogSegment
from tidelog.util.clock import SystemClock
from tidelog.util.scheduler import KafkaScheduler
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("crash", 0)
TOPIC_CONFIG = {"segment.bytes": "4096", "index.interval.bytes": "128"}

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tidelog.records.builder import build_batch
    from tidelog.storage.manager import LogManager
    from tidelog.util.clock import SystemClock
    from tidelog.util.scheduler import KafkaScheduler
    from tidelog.util.topic_partition import TopicPartition

    sched = KafkaScheduler()
    sched.startup()
    # Checkpoint recovery points often so that kills land before, during and after writes.
    props = {"log.flush.offset.checkpoint.interval.ms": "5", "log.initial.task.delay.ms": "0"}
    m = LogManager([Path(sys.argv[1])], props, clock=SystemClock(), scheduler=sched)
    m.startup()
    lg = m.get_or_create_log(TopicPartition("crash", 0),
                             {"segment.bytes": "4096", "index.interval.bytes": "128"})
    print("start", lg.log_end_offset, flush=True)
    i = 0
    while True:
        first = lg.log_end_offset
        n = 1 + i % 3
        recs = [(1_700_000_000_000 + first + j, None, b"value-%d" % (first + j)) for j in range(n)]
        info = lg.append_as_leader(build_batch(recs))
        assert info.first_offset == first, (info.first_offset, first)
        i += 1
        if i % 4 == 0:
            lg.flush()
            print("ack", lg.log_end_offset - 1, flush=True)
    """
)


def _read_all(lg: object, start: int, end: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = start
    while offset < end:
        info = lg.read(offset, 1 << 20, isolation=_log_end_isolation())  # type: ignore[attr-defined]
        data = info.records.read() if info.records is not None else b""
        if not data:
            break
        for batch in iter_batches(memoryview(data), 0, len(data)):
            for rec in batch.iter_records():
                out[rec.offset] = bytes(rec.value or b"")
            offset = batch.last_offset + 1
    return out


def _log_end_isolation() -> object:
    from tidelog.storage.log import FetchIsolation

    return FetchIsolation.LOG_END


def _run_child_until_acks(log_dir: Path, acks_wanted: int) -> tuple[int, int]:
    """Start the child, wait for ``acks_wanted`` acks, SIGKILL it; (start LEO, max ack)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline().split()
        assert first and first[0] == "start", [*first, proc.stderr.read() if proc.stderr else ""]
        start_leo = int(first[1])
        max_ack, acks = -1, 0
        while acks < acks_wanted:
            line = proc.stdout.readline()
            assert line, f"child died early: {proc.stderr.read() if proc.stderr else ''}"
            kind, offset = line.split()
            assert kind == "ack"
            max_ack, acks = int(offset), acks + 1
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-append: the child never stops appending
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return start_leo, max_ack


def _restart_and_check(log_dir: Path, max_ack: int) -> int:
    assert not CleanShutdownFile(log_dir).exists()  # the crash left no marker
    sched = KafkaScheduler()
    sched.startup()
    m = LogManager([log_dir], {}, clock=SystemClock(), scheduler=sched)
    try:
        m.startup()
        lg = m.get_log(TP)
        assert lg is not None
        assert lg.log_end_offset >= max_ack + 1
        values = _read_all(lg, 0, lg.log_end_offset)
        for offset in range(max_ack + 1):
            assert values.get(offset) == b"value-%d" % offset, offset
        # Everything that survived is intact, acknowledged or not.
        assert sorted(values) == list(range(lg.log_end_offset))
        return int(lg.log_end_offset)
    finally:
        m.shutdown()
        sched.shutdown()


def test_kill_9_mid_append_keeps_every_acked_record(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    expected_start = 0
    for _ in range(3):
        # Rounds 2 and 3 start after the checker's clean shutdown: the child removes the
        # marker before loading, so its crash must again be recovered as unclean.
        start_leo, max_ack = _run_child_until_acks(log_dir, acks_wanted=150)
        assert start_leo == expected_start
        assert max_ack >= start_leo
        expected_start = _restart_and_check(log_dir, max_ack)
    segments = sorted((log_dir / "crash-0").glob("*.log"))
    assert len(segments) > 3  # the test spanned several segment rolls


LOADER_BLOCKS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tidelog.storage import manager_tasks
    from tidelog.storage.manager import LogManager
    from tidelog.util.clock import SystemClock
    from tidelog.util.scheduler import KafkaScheduler

    original = manager_tasks.Log.open
    loaded = []

    def slow_open(*args, **kwargs):
        if loaded:
            print("loading", flush=True)
            sys.stdin.read()  # block until killed: a crash in the middle of loading
        loaded.append(1)
        return original(*args, **kwargs)

    manager_tasks.Log.open = slow_open
    m = LogManager([Path(sys.argv[1])], {}, clock=SystemClock(), scheduler=KafkaScheduler())
    m.startup()
    """
)


def test_crash_during_loading_counts_as_unclean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    sched = KafkaScheduler()
    m = LogManager([log_dir], {}, clock=SystemClock(), scheduler=sched)
    m.startup()
    for p in range(3):
        lg = m.get_or_create_log(TopicPartition("t", p))
        lg.append_as_leader(build_batch([(1_700_000_000_000, None, b"v")]))
    m.shutdown()
    assert CleanShutdownFile(log_dir).exists()

    proc = subprocess.Popen(
        [sys.executable, "-c", LOADER_BLOCKS, str(log_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "loading"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # The marker went before the first log was opened, so the next start must recover.
    assert not CleanShutdownFile(log_dir).exists()
    calls = 0
    original = LogSegment.recover

    def counting(seg: LogSegment, *args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        return original(seg, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", counting)
    m = LogManager([log_dir], {}, clock=SystemClock(), scheduler=KafkaScheduler())
    m.startup()
    assert len(m.all_logs()) == 3
    m.shutdown()
    assert calls >= 3
