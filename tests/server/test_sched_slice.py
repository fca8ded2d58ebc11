"""The event loop thread's scheduler slice (tidelog.server.sched_slice): ``tidelog serve``
asks for a 100 µs slice (``TIDELOG_LOOP_SLICE_US`` names another, 0 the kernel's) on the
loop's thread only (the threads it starts keep the kernel's), and a value out of the kernel's
bounds stops the start with one line. Each case runs in a thread of its own (or a broker
process), so the test process's own threads keep their slices."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from slice_support import in_thread, kernel_keeps_slices, kernel_slice_ns

from tidelog.server.sched_slice import (
    ENV,
    LOOP_SLICE_US,
    RESET_ON_FORK,
    thread_attr,
    tune_loop_slice,
)


def test_the_loop_thread_gets_the_slice_and_its_threads_do_not() -> None:
    default_ns = kernel_slice_ns()

    def run() -> tuple[str, int, int, int, int, int]:
        said = tune_loop_slice({ENV: "100"})
        attr = thread_attr()
        child = in_thread(lambda: thread_attr().sched_runtime)
        return (said, attr.sched_runtime, attr.sched_flags, attr.sched_policy,
                attr.sched_nice, child)

    said, runtime, flags, policy, nice, child = in_thread(run)
    assert policy == 0 and nice == os.nice(0)  # SCHED_OTHER, the nice it had
    if kernel_keeps_slices():
        assert said == "100 µs"
        assert runtime == 100_000
        assert flags & RESET_ON_FORK
        assert child == default_ns != runtime  # a thread it starts: the kernel's slice
    else:
        assert "keeps no custom slice" in said


def _tuned(env: dict[str, str]) -> tuple[str, int]:
    return tune_loop_slice(env), thread_attr().sched_runtime


def test_the_environment_sets_another_slice_or_none() -> None:
    default_ns = kernel_slice_ns()
    said, runtime = in_thread(partial(_tuned, {ENV: "250"}))
    kept, untouched = in_thread(partial(_tuned, {ENV: "0"}))
    assert kept == f"the kernel's ({ENV}=0)" and untouched == default_ns
    unset, short = in_thread(partial(_tuned, {}))  # unset: LOOP_SLICE_US
    assert LOOP_SLICE_US == 100
    if kernel_keeps_slices():
        assert said == "250 µs" and runtime == 250_000
        assert unset == "100 µs" and short == 100_000


@pytest.mark.parametrize("raw", ["5", "100001", "-1", "fast"])
def test_a_value_outside_the_bounds_is_refused(raw: str) -> None:
    before = thread_attr().sched_runtime
    with pytest.raises(ValueError, match=ENV):
        tune_loop_slice({ENV: raw})
    assert thread_attr().sched_runtime == before


def test_serve_stops_with_one_line_on_a_bad_value(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / 'logs'}"],
        capture_output=True, text=True, timeout=60, env={**os.environ, ENV: "5"})
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{ENV}=5: outside 100..100000" in errors[0]
    assert not (tmp_path / "logs").exists()  # stopped before the broker started


def _serving_threads(tmp_path: Path, env: dict[str, str]) -> tuple[int, list[int], str]:
    """A ``tidelog serve`` with ``env``: (its loop thread's slice, its other threads'
    slices, its log), in ns."""
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--ready-file", str(ready),
         "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'logs'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**{k: v for k, v in os.environ.items() if k != ENV}, **env})
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        loop_thread = thread_attr(proc.pid).sched_runtime  # the main thread runs the loop
        others = [thread_attr(int(t)).sched_runtime
                  for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    return loop_thread, others, err


def test_a_serving_broker_takes_the_short_slice_unless_told_not_to(tmp_path: Path) -> None:
    default_ns = kernel_slice_ns()
    plain, plain_others, plain_log = _serving_threads(tmp_path / "plain", {})
    kept, kept_others, kept_log = _serving_threads(tmp_path / "kept", {ENV: "0"})
    assert kept == default_ns and set(kept_others) == {default_ns}
    assert f"scheduler slice: the kernel's ({ENV}=0)" in kept_log
    assert "the kernel's slice again" not in kept_log  # nothing to govern
    assert "scheduler slice: " in plain_log
    if kernel_keeps_slices():
        assert plain == 100_000 and "scheduler slice: 100 µs" in plain_log
        assert plain_others and set(plain_others) == {default_ns}  # its threads: the kernel's
        assert "the kernel's slice again while the loop is over 50% busy" in plain_log
