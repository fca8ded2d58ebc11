"""The loop thread's short slice kept only while the loop mostly sleeps
(tidelog.server.slice_governor): the governor's decisions from injected clocks, its slice
applied to a real thread and read back from the kernel, its ticks on a real event loop, and
``tidelog serve``'s settings."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from slice_support import in_thread, kernel_keeps_slices, kernel_slice_ns

from tidelog.server.sched_slice import (
    BUSY_ENV,
    ENV,
    LOOP_SLICE_MAX_BUSY,
    loop_slice_max_busy,
    thread_attr,
    tune_loop_slice,
)
from tidelog.server.slice_governor import SliceGovernor, loop_slice_governor


class Clocks:
    """A thread's CPU time and the wall clock, moved by the test: ``run(busy)`` is a second
    with the thread on a core for ``busy`` of it."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0

    def run(self, busy: float, seconds: float = 1.0) -> None:
        self.cpu += busy * seconds
        self.wall += seconds


def _governor(clocks: Clocks, applied: list[int], max_busy: float = 0.5) -> SliceGovernor:
    return SliceGovernor(100, max_busy, cpu_clock=lambda: clocks.cpu,
                         wall_clock=lambda: clocks.wall, apply=applied.append)


def test_the_short_slice_goes_above_the_mark_and_comes_back_under_half_of_it() -> None:
    clocks, applied = Clocks(), []
    g = _governor(clocks, applied)
    seen = []
    for busy in (0.2, 0.5, 0.9, 0.95, 0.4, 0.3, 0.2, 0.1, 0.6):
        clocks.run(busy)
        seen.append((round(g.check(), 6), g.short))
    assert seen == [(0.2, True), (0.5, True), (0.9, False), (0.95, False), (0.4, False),
                    (0.3, False), (0.2, True), (0.1, True), (0.6, False)]
    assert applied == [0, 100, 0] and g.switches == 3  # 0: the kernel's slice


def test_a_share_is_over_the_time_since_the_last_check() -> None:
    clocks, applied = Clocks(), []
    g = _governor(clocks, applied)
    clocks.run(1.0, seconds=0.2)  # a fifth of a second fully busy, then four asleep
    clocks.run(0.0, seconds=0.8)
    assert g.check() == pytest.approx(0.2) and g.short and applied == []
    clocks.run(0.9, seconds=3.0)
    assert g.check() == pytest.approx(0.9) and not g.short and applied == [0]
    assert g.check() == 0.0 and not g.short and applied == [0]  # no time passed: no switch


def test_a_refused_switch_stops_governing_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()

    def refuse(slice_us: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    g = SliceGovernor(100, 0.5, cpu_clock=lambda: clocks.cpu, wall_clock=lambda: clocks.wall,
                      apply=refuse)
    clocks.run(0.9)
    with caplog.at_level(logging.WARNING, logger="tidelog.server.slice_governor"):
        g.check()
    assert g.stopped and g.short and g.switches == 0
    assert "Operation not permitted; left as it is" in caplog.text


async def switched(governor: SliceGovernor, seen: int) -> None:
    """Until ``governor`` switched past ``seen`` switches (its timer runs on this loop)."""
    while governor.switches == seen:
        await asyncio.sleep(0.001)


def test_it_checks_on_the_loop_until_stopped() -> None:
    clocks, applied = Clocks(), []

    async def main() -> tuple[int, list[int]]:
        g = SliceGovernor(100, 0.5, interval_s=0.001, cpu_clock=lambda: clocks.cpu,
                          wall_clock=lambda: clocks.wall, apply=applied.append)
        g.start(asyncio.get_running_loop())
        for busy in (0.9, 0.1, 0.9):  # each reading waits for the governor's next check
            clocks.run(busy)
            seen = g.switches
            await asyncio.wait_for(switched(g, seen), 30)  # (a generous deadline of its own)
        g.stop()
        switches = g.switches
        clocks.run(0.1)
        await asyncio.sleep(0.05)  # a stopped governor checks no more
        return switches, list(applied)

    switches, seen = asyncio.run(main())
    assert switches == 3 and seen == [0, 100, 0] and applied == seen


@pytest.mark.skipif(not kernel_keeps_slices(), reason="Linux before 6.12 keeps no slice")
def test_a_real_thread_gets_the_kernel_slice_back_and_the_short_one_again() -> None:
    default_ns = kernel_slice_ns()

    def run() -> list[int]:
        tune_loop_slice({ENV: "100"})
        clocks = Clocks()  # the real sched_setattr, the shares from the test's clocks
        governor = SliceGovernor(100, 0.5, cpu_clock=lambda: clocks.cpu,
                                 wall_clock=lambda: clocks.wall)
        seen = [thread_attr().sched_runtime]
        for busy in (0.9, 0.1):
            clocks.run(busy)
            governor.check()
            seen.append(thread_attr().sched_runtime)
        return seen

    assert in_thread(run) == [100_000, default_ns, 100_000]


def test_no_governor_without_a_short_slice_or_with_busy_one() -> None:
    def governed(env: dict[str, str], tune: bool) -> SliceGovernor | None:
        if tune:
            tune_loop_slice(env)
        return loop_slice_governor(env)

    assert in_thread(lambda: governed({ENV: "0"}, True)) is None  # the kernel's: nothing
    assert in_thread(lambda: governed({ENV: "100", BUSY_ENV: "1"}, True)) is None  # kept
    assert in_thread(lambda: governed({ENV: "100"}, False)) is None  # not applied here
    got = in_thread(lambda: governed({ENV: "150", BUSY_ENV: "0.7"}, True))
    unset = in_thread(lambda: governed({}, True))  # serve's defaults
    if kernel_keeps_slices():
        assert got is not None and got.slice_us == 150 and got.max_busy == 0.7
        assert unset is not None and (unset.slice_us, unset.max_busy) == (100, 0.5)
    assert loop_slice_max_busy({}) == LOOP_SLICE_MAX_BUSY == 0.5


@pytest.mark.parametrize("raw", ["0", "-0.5", "1.5", "nan", "half"])
def test_a_busy_mark_outside_its_bounds_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match=BUSY_ENV):
        loop_slice_max_busy({BUSY_ENV: raw})


def test_serve_stops_with_one_line_on_a_bad_busy_mark(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "serve", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / 'logs'}"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, ENV: "100", BUSY_ENV: "2"})
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{BUSY_ENV}=2: outside (0, 1]" in errors[0]
    assert not (tmp_path / "logs").exists()  # stopped before the broker started
