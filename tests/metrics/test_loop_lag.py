"""The loop-lag histogram sees a callback that holds the loop; the stall recorder names it
(a plain callback, a task's coroutine, a garbage collection) and ignores short ones."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

from tidelog.metrics.histogram import LatencyHistogram
from tidelog.metrics.loop_lag import (
    LAG_BUSY_SHARE,
    LagProbe,
    StallRecorder,
    classify,
    next_wait,
)


def hold_loop(ms: float) -> None:
    """Keep the loop's thread busy for ``ms`` (the stall under measurement)."""
    deadline = time.perf_counter() + ms / 1000
    while time.perf_counter() < deadline:
        pass


def start_probe(hist: LatencyHistogram, interval_s: float,
                idle_interval_s: float | None = None) -> Callable[[], object]:
    """The broker's probe (``LagProbe``), started on the running loop: its cancel."""
    probe = LagProbe(hist, interval_s, idle_interval_s)
    probe.start(asyncio.get_running_loop())
    return probe.cancel


def test_a_held_loop_is_observed_late() -> None:
    hist = LatencyHistogram()

    async def main() -> None:
        cancel = start_probe(hist, 0.002)
        deadline = time.monotonic() + 10
        while hist.count < 3 and time.monotonic() < deadline:  # the monitor is ticking
            await asyncio.sleep(0.001)
        hold_loop(40)
        while hist.count < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        cancel()
        count = hist.count
        await asyncio.sleep(0.02)  # cancelled: no more wakes
        assert hist.count == count

    asyncio.run(main())
    assert hist.count >= 6
    assert hist.quantile_ms(1.0) >= 20  # the held 40 ms, less at most one interval


def test_an_idle_loop_is_probed_less_often_and_a_busy_one_every_interval() -> None:
    """The wait after each wake (10 ms interval, 200 ms when idle): an idle loop's doubles up
    to the idle interval; a loop on CPU, or late through its own work, goes back to 10 ms;
    a wake late only for a core (little CPU used) counts as idle."""
    share = LAG_BUSY_SHARE
    waits, wait = [], 0.01
    for _ in range(8):  # idle: 1% of the time on CPU
        wait = next_wait(wait, 0.01, 0.2, wait, 0.0, 0.01 * wait)
        waits.append(wait)
    assert waits == [0.02, 0.04, 0.08, 0.16, 0.2, 0.2, 0.2, 0.2]
    assert next_wait(0.2, 0.01, 0.2, 0.2, 0.0, share * 0.2) == 0.01  # busy: back to 10 ms
    assert next_wait(0.2, 0.01, 0.2, 0.2, 0.0, share * 0.2 * 0.9) == 0.2  # just under: idle
    # 50 ms late, 30 ms of it on CPU: late through its own work
    assert next_wait(0.04, 0.01, 0.2, 0.09, 0.05, 0.03) == 0.01
    # 50 ms late with 1 ms on CPU: waiting for a core, not busy
    assert next_wait(0.04, 0.01, 0.2, 0.09, 0.05, 0.001) == 0.08


def test_the_monitor_backs_off_on_a_real_idle_loop() -> None:
    """On a real loop, over the same time, an idle loop is probed fewer times than a busy
    one (counts on a loaded machine vary; their order does not)."""
    idle, busy = LatencyHistogram(), LatencyHistogram()

    async def run(hist: LatencyHistogram, seconds: float, work: bool) -> None:
        cancel = start_probe(hist, 0.01, idle_interval_s=0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if work:
                hold_loop(1)  # the loop's thread busy most of the time
            await asyncio.sleep(0 if work else 0.05)
        cancel()

    asyncio.run(run(idle, 1.5, False))
    asyncio.run(run(busy, 1.5, True))
    assert idle.count <= 30 and idle.count < busy.count, (idle.count, busy.count)


async def _stalling_step() -> None:
    await asyncio.sleep(0)
    hold_loop(15)
    await asyncio.sleep(0)


def stall_plain() -> None:
    hold_loop(12)


def test_the_recorder_names_what_held_the_loop() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(stall_plain)
        loop.call_soon(lambda: None)  # short: not kept
        await asyncio.create_task(_stalling_step())

    with StallRecorder(threshold_ms=5) as rec:
        asyncio.run(main())
    whats = [s.what for s in rec.stalls]
    # each injected stall is in the recorder's list, named, at least as long as it was held;
    # anything else a loaded machine adds (a collection, a preempted step) may be there too
    plain = [s.duration_ns for s in rec.stalls if s.what.endswith("test_loop_lag.stall_plain")]
    step = [s.duration_ns for s in rec.stalls
            if s.what.startswith("task _stalling_step (test_loop_lag.py:")]  # fmt: skip
    assert plain and max(plain) >= 12_000_000, whats
    assert step and max(step) >= 15_000_000, whats
    assert all(s.duration_ns > 5_000_000 for s in rec.stalls)
    assert all(row[1] >= 1 and row[3] >= 5 for row in rec.summary())


def test_garbage_collections_over_the_threshold_are_kept() -> None:
    junk = [[i] for i in range(300_000)]  # a collection that walks them takes a while
    with StallRecorder(threshold_ms=0.0) as rec:
        gc.collect()
    del junk
    assert any(s.what == "gc gen 2" for s in rec.stalls), rec.stalls


def test_uninstall_restores_the_loop() -> None:
    rec = StallRecorder(threshold_ms=0.0)
    with rec:
        pass
    n = len([s for s in rec.stalls if not s.what.startswith("gc")])
    asyncio.run(asyncio.sleep(0))
    assert len([s for s in rec.stalls if not s.what.startswith("gc")]) == n


def test_the_broker_exports_its_loop_lag() -> None:
    """/metrics of a running broker: the summary with Kafka-style quantiles and a growing count."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from tidelog.testing import EmbeddedBroker

    def lag_samples(url: str) -> dict[str, float]:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        return {s.name + s.labels.get("quantile", ""): s.value
                for fam in text_string_to_metric_families(text) if fam.name == "tidelog_eventloop_lag_ms"
                for s in fam.samples}

    with EmbeddedBroker({"http.listeners": "http://127.0.0.1:0"}) as broker:
        first = lag_samples(broker.http_url)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            later = lag_samples(broker.http_url)
            if later["tidelog_eventloop_lag_ms_count"] > first["tidelog_eventloop_lag_ms_count"]:
                break
    assert later["tidelog_eventloop_lag_ms_count"] > first["tidelog_eventloop_lag_ms_count"]
    assert {"tidelog_eventloop_lag_ms0.99", "tidelog_eventloop_lag_ms0.999",
            "tidelog_eventloop_lag_ms_sum"} <= set(later)


def test_the_watchdog_finds_a_stall_on_any_loop() -> None:
    """A loop in its own thread (uvloop when installed, as the broker's) held for 40 ms: the
    watchdog keeps a stall of about that long, naming the function that held it. A stall
    the watchdog's thread took no sample of (the machine gave it no core for those 40 ms)
    is named "between samples"; the hold is repeated, up to five times, until one is
    sampled."""
    import threading

    from tidelog.metrics.loop_lag import StallWatchdog

    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever)
    t.start()
    try:
        with StallWatchdog(loop, t.ident or 0, threshold_ms=5,
                           loop_native_id=t.native_id or 0) as dog:
            for _ in range(5):
                held = threading.Event()
                seen = len(dog.stalls)
                loop.call_soon_threadsafe(lambda ev=held: (hold_loop(40), ev.set()))
                held.wait(10)
                deadline = time.monotonic() + 10
                while len(dog.stalls) == seen and time.monotonic() < deadline:
                    time.sleep(0.005)  # polling the watchdog's result with a deadline
                if any("hold_loop" in s.what for s in dog.stalls):
                    break
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join()
        loop.close()
    long = [s for s in dog.stalls if s.duration_ns > 20_000_000]
    assert long, dog.stalls
    named = [s for s in long if s.what != "between samples"]
    assert named, long
    assert all("test_loop_lag.py:hold_loop" in s.what for s in named), named
    assert named[0].cpu_ns > 0  # the loop's thread was busy: its CPU time is measured


_SPIN = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
"""


def test_the_watchdog_tells_a_loop_that_waited_for_a_core() -> None:
    """The loop's thread at the lowest priority shares one CPU with a process that spins
    there: it does nothing but answer pings, each of which waits for the CPU. The watchdog
    keeps those stalls as time in the run queue, not as work or a wait for the GIL."""
    import os
    import subprocess
    import sys
    import threading

    from tidelog.metrics.loop_lag import StallWatchdog

    cpu = min(os.sched_getaffinity(0))
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever)
    t.start()
    spinner = None
    try:
        assert t.native_id is not None
        os.sched_setaffinity(t.native_id, {cpu})
        os.setpriority(os.PRIO_PROCESS, t.native_id, 19)  # its own thread only (Linux)
        spinner = subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu), "60"])
        with StallWatchdog(loop, t.ident or 0, threshold_ms=5,
                           loop_native_id=t.native_id) as dog:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not classify(dog.stalls)[1]:
                time.sleep(0.05)  # polling the watchdog's result with a deadline
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        loop.call_soon_threadsafe(loop.stop)
        t.join()
        loop.close()
    busy, queued, _ = classify(dog.stalls)
    assert queued, dog.stalls
    assert all(0 <= s.queued_ns <= s.duration_ns for s in dog.stalls), dog.stalls
    assert not busy or sum(s.duration_ns for s in queued) > sum(s.duration_ns for s in busy)
