"""A truncation's leader-epoch checkpoint, written on the LogManager's scheduler (Kafka's
leader-epoch-cache-flush task, KAFKA-16541), real log dirs and a real KafkaScheduler: a
clean shutdown ends with every such write on disk before its clean-shutdown marker, and a
write that fails with a disk error takes its log dir offline."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_log_support import batch

from tidelog.storage.checkpoints import CheckpointFile
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.manager import LogManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import KafkaScheduler
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("moved", 0)
DEADLINE_S = 30
SLOW_WRITE_S = 0.3  # the injected disk's time for one checkpoint write
PREFIX = "test-log-manager-scheduler-"


class EpochWrites:
    """Every leader-epoch-checkpoint write: the threads making them, the entries written;
    each ``slow`` (as a loaded disk), or failing with ``error``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, slow: bool = False,
                 error: OSError | None = None) -> None:
        self.threads: list[str] = []
        self.written: list[list[EpochEntry]] = []
        real = CheckpointFile.write

        def write(file: CheckpointFile[Any], entries: Any) -> None:
            if file.path.name != LEADER_EPOCH_CHECKPOINT_FILE:
                return real(file, entries)
            self.threads.append(threading.current_thread().name)
            if slow:
                time.sleep(SLOW_WRITE_S)
            if error is not None:
                raise error
            real(file, entries)
            self.written.append(list(entries))

        monkeypatch.setattr(CheckpointFile, "write", write)


def manager(dirs: list[Path], scheduler: KafkaScheduler) -> LogManager:
    lm = LogManager(dirs, {}, clock=ManualClock(), scheduler=scheduler)
    lm.startup()
    return lm


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "a", tmp_path / "b"]


@pytest.fixture
def stopped() -> Iterator[list[LogManager]]:
    made: list[LogManager] = []
    yield made
    for lm in made:
        lm.shutdown()


def led_at_epoch_1(lm: LogManager) -> Log:
    """Records 0-2 of epoch 0, then led at epoch 1 from offset 3: on disk."""
    lg = lm.get_or_create_log(TP)
    lg.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    lg.leader_epoch_cache.assign(1, 3)
    assert on_disk(lg) == "0\n2\n0 0\n1 3\n"
    return lg


def on_disk(lg: Log) -> str:
    return (Path(lg.dir) / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_a_clean_shutdown_ends_with_the_scheduled_epoch_writes_on_disk(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower's truncation schedules its write (slow) and the broker shuts down at once:
    the scheduler (the LogManager's) runs it before the logs close, the marker after."""
    lm = manager(dirs, KafkaScheduler(thread_name_prefix=PREFIX))
    lg = led_at_epoch_1(lm)
    path, log_dir = Path(lg.dir), Path(lg.dir).parent
    writes = EpochWrites(monkeypatch, slow=True)
    assert not lg.truncate_to(3)  # a follower now: epoch 1 ends where it started
    lm.shutdown()
    assert (path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n1\n0 0\n"
    assert writes.written == [[EpochEntry(0, 0)]]
    assert [t.startswith(PREFIX) for t in writes.threads] == [True]
    assert (log_dir / ".kafka_cleanshutdown").exists()


def test_a_shutdown_writes_what_a_scheduler_not_its_own_has_not(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler handed over running (not the LogManager's to stop) is busy: the
    truncation's write waits behind its task, and the shutdown writes it itself."""
    scheduler = KafkaScheduler(threads=1, thread_name_prefix=PREFIX)
    scheduler.startup()
    busy, go = threading.Event(), threading.Event()
    try:
        lm = manager(dirs, scheduler)
        lg = led_at_epoch_1(lm)
        writes = EpochWrites(monkeypatch)
        scheduler.schedule("busy", lambda: (busy.set(), go.wait(DEADLINE_S)))
        assert busy.wait(DEADLINE_S)
        assert not lg.truncate_to(3)
        assert writes.written == []  # (queued behind the busy task)
        lm.shutdown()
        assert on_disk(lg) == "0\n1\n0 0\n"
        assert writes.threads == [threading.current_thread().name]
        assert (Path(lg.dir).parent / ".kafka_cleanshutdown").exists()
    finally:
        go.set()
        scheduler.shutdown()
    assert writes.written == [[EpochEntry(0, 0)]]  # the scheduled one found nothing newer


def test_a_scheduled_epoch_write_failing_takes_its_dir_offline(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch,
        stopped: list[LogManager]) -> None:
    """Kafka's writeIfDirExists on an IOException: the LogDirFailureChannel takes the dir
    offline; its partitions answer KAFKA_STORAGE_ERROR from then on."""
    lm = manager(dirs, KafkaScheduler(thread_name_prefix=PREFIX))
    stopped.append(lm)
    lg = led_at_epoch_1(lm)
    log_dir = Path(lg.dir).parent
    offline = threading.Event()
    lm.failure_channel.add_listener(lambda path: offline.set())
    EpochWrites(monkeypatch, error=OSError(errno.EIO, "Input/output error"))
    assert not lg.truncate_to(3)
    assert offline.wait(DEADLINE_S)
    assert [d.online for d in lm.dirs if d.path == log_dir] == [False]
    assert lm.offline_partition_dir(TP) == log_dir
    assert lm.get_log(TP) is None


def test_a_truncation_on_a_stopped_scheduler_writes_at_once(
        dirs: list[Path], monkeypatch: pytest.MonkeyPatch,
        stopped: list[LogManager]) -> None:
    """A scheduler that takes no task (stopped: Kafka ignores it) leaves no write undone."""
    scheduler = KafkaScheduler(thread_name_prefix=PREFIX)
    lm = manager(dirs, scheduler)
    stopped.append(lm)
    lg = led_at_epoch_1(lm)
    writes = EpochWrites(monkeypatch)
    scheduler.shutdown()
    assert not lg.truncate_to(3)
    assert writes.threads == [threading.current_thread().name]
    assert on_disk(lg) == "0\n1\n0 0\n"
