"""LogManager loading details: worker threads, progress logs, load failures, broker wiring."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tidelog.records.builder import build_batch
from tidelog.storage import manager_tasks
from tidelog.storage.checkpoints import CleanShutdownFile
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.log import Log
from tidelog.storage.manager import LogManager
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import KafkaScheduler, ManualScheduler
from tidelog.util.topic_partition import TopicPartition


def _manager(root: Path, clock: ManualClock, **props: str) -> LogManager:
    cfg = LogManagerConfig.from_props({k.replace("_", "."): v for k, v in props.items()})
    return LogManager([root], {}, clock=clock, scheduler=ManualScheduler(clock), config=cfg)


def _populate(root: Path, partitions: int) -> None:
    clock = ManualClock()
    m = _manager(root, clock)
    m.startup()
    for p in range(partitions):
        lg = m.get_or_create_log(TopicPartition("t", p))
        lg.append_as_leader(build_batch([(clock.milliseconds(), b"k", b"v%d" % p)]))
    m.shutdown()


def test_loading_uses_recovery_threads_per_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _populate(tmp_path, 8)
    names: set[str] = set()
    barrier = threading.Barrier(3, timeout=30)
    original = Log.open

    def tracking_open(*args: Any, **kwargs: Any) -> Log:
        name = threading.current_thread().name
        first_call = name not in names
        names.add(name)
        if first_call:
            try:
                barrier.wait()  # each worker's first load waits for the other two
            except threading.BrokenBarrierError:
                pass
        return original(*args, **kwargs)

    monkeypatch.setattr(manager_tasks.Log, "open", tracking_open)
    clock = ManualClock()
    m = _manager(tmp_path, clock, num_recovery_threads_per_data_dir="3")
    m.startup()
    try:
        assert len(m.all_logs()) == 8
        assert len(names) == 3
        assert all(n.startswith("log-recovery-") for n in names)
        assert not barrier.broken
    finally:
        m.shutdown()


def test_loading_logs_progress_per_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _populate(tmp_path, 20)
    m = _manager(tmp_path, ManualClock())
    with caplog.at_level(logging.INFO, logger="tidelog.storage.manager_tasks"):
        m.startup()
    m.shutdown()
    text = caplog.text
    assert re.search(rf"Loading 20 logs in {re.escape(str(tmp_path.resolve()))} \(clean", text)
    assert re.search(r"20/20 \(100%\)", text)
    assert re.search(r"10/20 \(50%\)", text)
    assert "Loaded 20 logs from 1 dirs" in text


def test_failed_load_names_dir_releases_locks_and_stays_unclean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _populate(tmp_path, 3)
    assert CleanShutdownFile(tmp_path).exists()
    original = Log.open

    def failing_open(path: Path, *args: Any, **kwargs: Any) -> Log:
        if Path(path).name == "t-1":
            raise OSError(5, "Input/output error")
        return original(path, *args, **kwargs)

    monkeypatch.setattr(manager_tasks.Log, "open", failing_open)
    m = _manager(tmp_path, ManualClock())
    with pytest.raises(KafkaStorageError, match=re.escape(str(tmp_path.resolve() / "t-1"))):
        m.startup()
    # The marker was consumed before loading and not rewritten: the next start recovers.
    assert not CleanShutdownFile(tmp_path).exists()
    monkeypatch.setattr(manager_tasks.Log, "open", original)
    again = _manager(tmp_path, ManualClock())  # locks were released
    again.startup()
    assert len(again.all_logs()) == 3
    again.shutdown()


def test_unstarted_kafka_scheduler_is_started_and_stopped(tmp_path: Path) -> None:
    sched = KafkaScheduler()
    m = LogManager([tmp_path], {}, clock=ManualClock(), scheduler=sched)
    m.startup()
    assert sched.is_started()
    m.shutdown()
    assert not sched.is_started()
    # A scheduler started by its owner is left running.
    owned = KafkaScheduler()
    owned.startup()
    m2 = LogManager([tmp_path], {}, clock=ManualClock(), scheduler=owned)
    m2.startup()
    m2.shutdown()
    assert owned.is_started()
    owned.shutdown()


def test_broker_passing_topic_configs_after_load_applies_them(tmp_path: Path) -> None:
    clock = ManualClock()
    m = _manager(tmp_path, clock)
    m.startup()
    m.get_or_create_log(TopicPartition("t", 0), {"retention.ms": "5000"})
    m.get_or_create_log(TopicPartition("t", 1), {"retention.ms": "5000"})
    m.shutdown()
    m = _manager(tmp_path, clock)  # no topic config source: loads with broker defaults
    m.startup()
    lg0 = m.get_log(TopicPartition("t", 0))
    assert lg0 is not None and lg0.config.retention_ms == 604800000
    same = m.get_or_create_log(TopicPartition("t", 0), {"retention.ms": "5000"})
    assert same is lg0
    assert lg0.config.retention_ms == 5000
    lg1 = m.get_log(TopicPartition("t", 1))
    assert lg1 is not None and lg1.config.retention_ms == 5000  # the whole topic
    m.shutdown()


def test_producer_id_expiration_task(tmp_path: Path) -> None:
    clock = ManualClock()
    m = _manager(
        tmp_path,
        clock,
        producer_id_expiration_ms="10000",
        producer_id_expiration_check_interval_ms="1000",
    )
    m.startup()
    lg = m.get_or_create_log(TopicPartition("t", 0))
    batch = build_batch(
        [(clock.milliseconds(), b"k", b"v")], producer_id=42, producer_epoch=0, base_sequence=0
    )
    lg.append_as_leader(batch)
    assert 42 in lg.producer_state.active_producers
    clock.advance(9000)
    assert 42 in lg.producer_state.active_producers
    clock.advance(2000)
    assert 42 not in lg.producer_state.active_producers
    m.shutdown()


def test_periodic_tasks_wait_for_initial_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    m = _manager(tmp_path, clock, log_initial_task_delay_ms="30000")
    m.startup()
    lg = m.get_or_create_log(TopicPartition("t", 0), {"flush.ms": "0"})
    lg.append_as_leader(build_batch([(clock.milliseconds(), b"k", b"v")]))
    clock.advance(29999)
    assert lg.recovery_point == 0  # the flusher has not run yet
    clock.advance(1)
    assert lg.recovery_point == 1
    m.shutdown()
