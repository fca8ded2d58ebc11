"""Scheduler tests: ManualScheduler (MockScheduler semantics) and the real KafkaScheduler."""

from __future__ import annotations

import logging
import threading

import pytest

from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import KafkaScheduler, ManualScheduler


def test_manual_task_runs_only_when_due() -> None:
    clock = ManualClock(1000)
    sched = ManualScheduler(clock)
    ran: list[int] = []
    sched.schedule("once", lambda: ran.append(clock.milliseconds()), delay_ms=100)
    clock.advance(99)
    assert ran == []
    clock.advance(1)
    assert ran == [1100]
    clock.advance(1000)
    assert ran == [1100]  # one-shot tasks do not repeat
    assert sched.tasks() == []


def test_manual_zero_delay_runs_at_once() -> None:
    sched = ManualScheduler(ManualClock())
    ran: list[str] = []
    sched.schedule("now", lambda: ran.append("x"))
    assert ran == ["x"]


def test_manual_periodic_fixed_rate_catches_up() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    ran: list[int] = []
    sched.schedule("p", lambda: ran.append(clock.milliseconds()), delay_ms=10, period_ms=10)
    clock.advance(35)
    # Due at 10, 20, 30: three runs in one advance (fixed rate), none yet for 40.
    assert len(ran) == 3
    clock.advance(5)
    assert len(ran) == 4
    assert sched.tasks()[0].next_ms == 50


def test_manual_runs_in_due_order() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    order: list[str] = []
    sched.schedule("b", lambda: order.append("b"), delay_ms=20)
    sched.schedule("a", lambda: order.append("a"), delay_ms=10)
    sched.schedule("c", lambda: order.append("c"), delay_ms=20)
    clock.advance(100)
    assert order == ["a", "b", "c"]


def test_manual_exception_is_logged_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    ran: list[int] = []

    def boom() -> None:
        raise RuntimeError("task failed")

    sched.schedule("boom", boom, delay_ms=1, period_ms=1)
    sched.schedule("ok", lambda: ran.append(1), delay_ms=2)
    with caplog.at_level(logging.ERROR):
        clock.advance(3)
    assert ran == [1]
    assert [name for name, _ in sched.errors] == ["boom", "boom", "boom"]
    assert "boom" in caplog.text


def test_manual_cancel_and_shutdown() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    ran: list[str] = []
    t = sched.schedule("c", lambda: ran.append("c"), delay_ms=5, period_ms=5)
    sched.schedule("d", lambda: ran.append("d"), delay_ms=5)
    t.cancel()
    clock.advance(5)
    assert ran == ["d"]
    sched.shutdown()
    sched.schedule("late", lambda: ran.append("late"))
    clock.advance(100)
    assert ran == ["d"]


def test_manual_task_scheduling_task_runs_in_same_advance() -> None:
    clock = ManualClock(0)
    sched = ManualScheduler(clock)
    ran: list[str] = []

    def outer() -> None:
        ran.append("outer")
        sched.schedule("inner", lambda: ran.append("inner"), delay_ms=0)

    sched.schedule("outer", outer, delay_ms=10)
    clock.advance(10)
    assert ran == ["outer", "inner"]


def test_kafka_scheduler_runs_once_and_periodic() -> None:
    sched = KafkaScheduler(threads=2)
    sched.startup()
    try:
        once = threading.Event()
        count = 0
        three = threading.Event()

        def periodic() -> None:
            nonlocal count
            count += 1
            if count == 3:
                three.set()

        sched.schedule("once", once.set, delay_ms=0)
        sched.schedule("periodic", periodic, delay_ms=0, period_ms=1)
        assert once.wait(10)
        assert three.wait(10)
    finally:
        sched.shutdown()
    after = count
    assert after >= 3
    assert not sched.is_started()


def test_kafka_scheduler_survives_task_exception() -> None:
    sched = KafkaScheduler(threads=1)
    sched.startup()
    try:
        done = threading.Event()

        def boom() -> None:
            raise RuntimeError("x")

        sched.schedule("boom", boom)
        sched.schedule("after", done.set)
        assert done.wait(10)
    finally:
        sched.shutdown()


def test_kafka_scheduler_ignores_after_shutdown_and_drops_pending() -> None:
    sched = KafkaScheduler(threads=1)
    sched.startup()
    ran = threading.Event()
    sched.schedule("far", ran.set, delay_ms=3_600_000)
    sched.shutdown()
    task = sched.schedule("late", ran.set)
    assert task.cancelled
    assert not ran.is_set()
    with pytest.raises(ValueError):
        KafkaScheduler(threads=0)


def test_kafka_scheduler_double_start_rejected() -> None:
    sched = KafkaScheduler()
    sched.startup()
    try:
        with pytest.raises(RuntimeError):
            sched.startup()
    finally:
        sched.shutdown()


def test_kafka_scheduler_shutdown_runs_the_one_shot_tasks_already_due() -> None:
    """Kafka's (a ScheduledThreadPoolExecutor without delayed or periodic tasks after its
    shutdown): the thread busy, a due one-shot task queued behind it still runs before
    ``shutdown`` returns; a periodic task and one not due yet are dropped, nothing is taken
    once it is called."""
    clock = ManualClock(0)  # (never advanced: "later" is never due)
    sched = KafkaScheduler(threads=1, clock=clock)
    sched.startup()
    busy, go = threading.Event(), threading.Event()
    ran: list[str] = []
    sched.schedule("busy", lambda: (busy.set(), go.wait(10)))
    assert busy.wait(10)
    sched.schedule("due", lambda: ran.append("due"))
    sched.schedule("periodic", lambda: ran.append("periodic"), delay_ms=0, period_ms=1)
    sched.schedule("later", lambda: ran.append("later"), delay_ms=1)
    stopping = threading.Thread(target=sched.shutdown)
    stopping.start()
    while sched.is_started():  # (shutdown has taken the queue; the thread still busy)
        stopping.join(0.001)
    assert sched.schedule("refused", lambda: ran.append("refused")).cancelled
    go.set()
    stopping.join(10)
    assert not stopping.is_alive()
    assert ran == ["due"]
