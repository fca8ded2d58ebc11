"""Crash safety of compaction (#97, #138): a cleaner killed while writing `.cleaned`, after
writing it, after the `.swap` rename, half-way through replacing the old segments, or just
before dropping the `.swap` suffix, leaves a log that reopens to exactly the pre-clean or the
post-clean state.

Two ways to crash: an injected exception at the step (the in-memory Log is then thrown
away without flushing), and a real child process killed with SIGKILL at the step.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatchBuilder, iter_batches
from tidelog.storage.cleaner.cleaner import Cleaner, LogToClean
from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap
from tidelog.storage.cleaner.swap import FaultHook
from tidelog.storage.cleaner.throttler import Throttler
from tidelog.storage.log import FetchIsolation, Log
from tidelog.util.clock import ManualClock

NOW = 1_700_000_000_000
PROPS = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20)}
# step -> which state a restart must show
STEPS = {"writing": "pre", "cleaned": "pre", "swap": "post", "replacing": "post",
         "replaced": "post"}


class SimulatedCrash(BaseException):
    """Not an Exception: the cleaner's error handling must not tidy up after it."""


def _open(d: Path) -> Log:
    return Log.open(d, LogConfig.from_props(PROPS), clock=ManualClock(NOW))


def _build(d: Path, groups_of: int = 4) -> None:
    """Several small segments (one cleaning group) plus an active segment with data."""
    lg = _open(d)
    codecs = list(CompressionType)
    for i in range(48):
        b = RecordBatchBuilder(codecs[i % len(codecs)])
        b.append(NOW + i, b"key%d" % (i % 7), None if i % 11 == 5 else b"value%d" % i)
        b.append(NOW + i, b"other%d" % (i % 3), b"x" * (i % 13))
        lg.append_as_leader(b.build())
        if i % groups_of == groups_of - 1:
            lg.roll()
    lg.roll()
    b = RecordBatchBuilder()
    b.append(NOW, b"key1", b"in-the-active-segment")
    lg.append_as_leader(b.build())
    lg.close()


def _clean(d: Path, fault: FaultHook | None = None) -> None:
    lg = _open(d)
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    clock = ManualClock(NOW)
    cleaner = Cleaner(0, SkimpyOffsetMap(24 * 1000), dup_buffer_load_factor=0.9,
                      io_buffer_size=4096, throttler=Throttler(float("inf"), clock),
                      clock=clock, fault=fault)
    try:
        cleaner.clean(LogToClean(lg.topic_partition, lg, 0,  # type: ignore[arg-type]
                                 lg.active_segment.base_offset))
    except SimulatedCrash:
        lg.close_handlers()  # crash: no flush, no tidying
        raise
    lg.close()


def _state(d: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    lg = _open(d)
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 22, FetchIsolation.LOG_END).records.read()
        got = list(iter_batches(data))
        if not got:
            break
        out.extend((r.offset, r.key, r.value) for b in got for r in b)
        offset = got[-1].next_offset
    leftovers = [p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    lg.close()
    assert leftovers == []
    return out


@pytest.fixture
def states(tmp_path: Path) -> tuple[Path, list, list]:
    base = tmp_path / "base" / "crash-0"
    _build(base)
    post_dir = tmp_path / "post" / "crash-0"
    shutil.copytree(base, post_dir)
    _clean(post_dir)
    pre, post = _state(base), _state(post_dir)
    assert len(post) < len(pre)  # the clean really changes something
    return base, pre, post


def _crash_at(step: str) -> FaultHook:
    def hook(name: str) -> None:
        if name == step:
            raise SimulatedCrash(step)
    return hook


@pytest.mark.parametrize("step", list(STEPS))
def test_injected_crash_recovers_to_pre_or_post(states: tuple[Path, list, list], tmp_path: Path,
                                                step: str) -> None:
    base, pre, post = states
    d = tmp_path / step / "crash-0"
    shutil.copytree(base, d)
    with pytest.raises(SimulatedCrash):
        _clean(d, _crash_at(step))
    names = {p.name for p in d.iterdir()}
    if step in ("writing", "cleaned"):
        assert "00000000000000000000.log.cleaned" in names
    else:
        assert "00000000000000000000.log.swap" in names
    if step == "replacing":
        assert any(n.endswith(".log.deleted") for n in names)
        assert sum(n.endswith(".log") for n in names) > 1  # some old segments not renamed yet
    assert _state(d) == (pre if STEPS[step] == "pre" else post)
    _clean(d)  # and a later clean converges on the post-clean state
    assert _state(d) == post


CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, sys.argv[3])
    import test_cleaner_crash as t
    step = sys.argv[2]
    def hook(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    t._clean(__import__("pathlib").Path(sys.argv[1]), hook)
    sys.exit(3)  # not reached
""")


@pytest.mark.parametrize("step", list(STEPS))
def test_killed_process_recovers_to_pre_or_post(states: tuple[Path, list, list],
                                                tmp_path: Path, step: str) -> None:
    base, pre, post = states
    d = tmp_path / f"kill-{step}" / "crash-0"
    shutil.copytree(base, d)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(d), step, str(Path(__file__).parent)],
                          capture_output=True, timeout=120, env=os.environ.copy())
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert _state(d) == (pre if STEPS[step] == "pre" else post)


def test_crash_in_a_later_group_keeps_earlier_groups_and_latest_values(tmp_path: Path) -> None:
    """Two groups: the first is swapped in, the crash hits the second at `.cleaned`. The log
    is then cleaned up to the first group and untouched after it: every key's latest value
    is still there at its offset."""
    d = tmp_path / "groups" / "crash-0"
    _build(d)
    pre = _state(d)
    # segment.bytes just above one small segment: every old segment is its own group.
    PROPS["segment.bytes"] = "600"
    try:
        calls = {"n": 0}

        def hook(name: str) -> None:
            if name == "cleaned":
                calls["n"] += 1
                if calls["n"] == 2:
                    raise SimulatedCrash(name)

        with pytest.raises(SimulatedCrash):
            _clean(d, hook)
        after = _state(d)
    finally:
        PROPS["segment.bytes"] = str(1 << 20)
    latest = {}
    for off, key, value in pre:
        latest[key] = (off, key, value)
    assert set(latest.values()) <= set(after)
    assert set(after) <= set(pre)
    assert len(after) < len(pre)
