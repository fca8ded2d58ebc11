"""LogDirFailureChannel and the LogManager's handling of a failed dir: a failed fsync takes
the dir offline once (one ERROR line), nothing is written to it afterwards (fsyncgate), its
partitions refuse with KafkaStorageError (counted, not logged), the other dir keeps serving,
and the last dir failing tells the broker to shut down. Indexes keep no memory map."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from tidelog.records.builder import build_batch
from tidelog.storage.cleaner import CleanerConfig
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.log_dir_failure import LogDirFailureChannel, is_disk_failure
from tidelog.storage.manager import LogManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

A, B = TopicPartition("a", 0), TopicPartition("b", 0)


def _manager(dirs: list[Path]) -> LogManager:
    clock = ManualClock(1_700_000_000_000)
    m = LogManager(
        dirs,
        {"log.flush.interval.ms": "1000"},
        clock=clock,
        scheduler=ManualScheduler(clock),
        cleaner_config=CleanerConfig(enable_cleaner=False),
    )
    m.startup()
    return m


def _batch() -> bytes:
    return build_batch([(1_700_000_000_000, b"k", b"v" * 100)])


def _fail_fsync_under(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """fsync answers EIO for files under ``root`` (as a dying disk does); returns the calls."""
    real = os.fsync
    calls: list[str] = []

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(root)):
            calls.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_failed_fsync_takes_the_dir_offline_and_nothing_more_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    m = _manager([d1, d2])
    la, lb = m.get_or_create_log(A), m.get_or_create_log(B)
    assert Path(la.dir).parent == d1 and Path(lb.dir).parent == d2
    la.append_as_leader(_batch())
    lb.append_as_leader(_batch())
    log_file = Path(la.dir) / "00000000000000000000.log"
    size = log_file.stat().st_size
    calls = _fail_fsync_under(monkeypatch, d1)
    m.clock.advance(2000)  # type: ignore[attr-defined]
    with caplog.at_level(logging.ERROR):
        m.flush_dirty_logs()
        assert calls, "the flush reached the failing disk"
        assert m.failure_channel.has_offline_log_dir(d1)
        assert not m.failure_channel.has_offline_log_dir(d2)
        for _ in range(3):  # later requests are refused: counted, not logged
            with pytest.raises(KafkaStorageError, match="offline"):
                m.get_or_create_log(A)
        with pytest.raises(KafkaStorageError):
            la.append_as_leader(_batch())  # a handle kept from before: closed, no write
    offline_lines = [r for r in caplog.records if "is offline" in r.getMessage()]
    assert len(offline_lines) == 1 and r"Input/output error" in offline_lines[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records)
    assert m.failure_channel.repeat_count(d1) >= 3
    assert log_file.stat().st_size == size, "no byte written after the failed fsync"
    assert m.offline_partitions() == {A: d1}
    assert d1 not in m.live_log_dirs
    lb.append_as_leader(_batch())  # the other dir keeps serving
    assert lb.log_end_offset == 2
    m.shutdown()


def test_last_dir_failing_asks_for_shutdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = _manager([tmp_path / "only"])
    fired: list[int] = []
    m.add_all_dirs_offline_listener(lambda: fired.append(1))
    lg = m.get_or_create_log(A)
    lg.append_as_leader(_batch())
    _fail_fsync_under(monkeypatch, tmp_path)
    with pytest.raises(KafkaStorageError) as info:
        lg.flush()
    assert m.maybe_handle_io_error(lg, info.value, "flushing") is True
    assert m.maybe_handle_io_error(lg, info.value, "flushing") is True  # reported again
    assert fired == [1], "the shutdown request is made once"
    m.shutdown()


def test_resource_errors_do_not_take_a_dir_offline() -> None:
    assert is_disk_failure(OSError(errno.ENOSPC, "full"))
    assert not is_disk_failure(KafkaStorageError("x"))
    wrapped = KafkaStorageError("append")
    wrapped.__cause__ = OSError(errno.EMFILE, "Too many open files")
    assert not is_disk_failure(wrapped)
    channel = LogDirFailureChannel()
    assert channel.maybe_add_offline_log_dir(Path("/x"), "write", OSError(errno.EIO, "EIO"))
    assert not channel.maybe_add_offline_log_dir(Path("/x"), "write", None)
    assert channel.repeat_count(Path("/x")) == 1


def test_indexes_hold_no_memory_map_and_no_descriptor(tmp_path: Path) -> None:
    m = _manager([tmp_path])
    lg = m.get_or_create_log(A)
    for _ in range(200):
        lg.append_as_leader(build_batch([(1_700_000_000_000, b"k", os.urandom(100))] * 50))
    seg = lg.segments.active_segment
    assert seg.offset_index.entries > 0
    maps = Path("/proc/self/maps").read_text()
    assert str(tmp_path) not in maps, "no file of the log is memory-mapped"
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the descriptor listdir itself used
            pass
    open_here = [p for p in fds if p.startswith(str(tmp_path)) and not p.endswith(".lock")]
    assert [Path(p).suffix for p in open_here] == [".log"], open_here
    m.shutdown()
