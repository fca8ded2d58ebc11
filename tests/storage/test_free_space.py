"""The free-space floor (``log.dir.min.free.bytes``): a LogManager over real dirs whose free
space is read through an injected probe (the real statvfs one is proven on a loop-mounted file
system in tests/fault/test_free_space_floor.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.records.builder import build_batch
from tidelog.storage.cleaner import CleanerConfig
from tidelog.storage.free_space import (
    DEFAULT_FLOOR_CAP,
    JUST_BELOW_FLOOR,
    FreeSpaceFloor,
    LogDirBelowFloorError,
    default_floor,
    statvfs_probe,
)
from tidelog.storage.manager import LogManager
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.storage.validator import AppendOrigin
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

MiB = 1 << 20
TP = TopicPartition("events", 0)
BATCH = build_batch([(1_700_000_000_000, b"k", b"v" * 1000)])


class Disk:
    """Free bytes a test sets; total 1 GiB."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.calls = 0

    def __call__(self, path: Path) -> tuple[int, int]:
        self.calls += 1
        return self.free, 1 << 30


@pytest.fixture
def disk() -> Disk:
    return Disk(100 * MiB)


@pytest.fixture
def manager(tmp_path: Path, disk: Disk) -> Iterator[LogManager]:
    clock = ManualClock()
    config = LogManagerConfig.from_props({"log.dir.min.free.bytes": str(16 * MiB),
                                          "log.initial.task.delay.ms": "0"})
    m = LogManager([tmp_path / "d"], {}, clock=clock, scheduler=ManualScheduler(clock),
                   config=config, cleaner_config=CleanerConfig(enable_cleaner=False))
    m.free_space.probe = disk
    m.free_space.measure_all()
    m.startup()
    yield m
    m.shutdown()


def test_default_floor_is_the_smaller_of_1_gib_and_5_percent() -> None:
    assert default_floor(64 * MiB) == int(64 * MiB * 0.05)
    assert default_floor(100 << 30) == DEFAULT_FLOOR_CAP
    assert LogManagerConfig.from_props({}).min_free_bytes is None


def test_below_the_floor_appends_are_refused_and_resume_by_themselves(
    manager: LogManager, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    lg = manager.get_or_create_log(TP)
    assert lg.append_as_leader(BATCH).first_offset == 0
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    disk.free = 16 * MiB - 100  # something else filled the disk below the floor
    with caplog.at_level(logging.WARNING):
        manager.check_free_space()  # the periodic measure sees it
    with pytest.raises(LogDirBelowFloorError) as err:
        lg.append_as_leader(BATCH)
    assert err.value.kafka_error == "NOT_ENOUGH_REPLICAS"
    assert lg.log_end_offset == 1  # nothing was written
    assert manager.free_space.degraded and "is at its free-space floor" in caplog.text
    # reads and DeleteRecords go on
    assert lg.read(0, 1 << 20).records is not None
    manager.delete_records(TP, 1)
    assert lg.log_start_offset == 1
    disk.free = 40 * MiB  # retention or an operator freed space: no restart, no call
    assert lg.append_as_leader(BATCH).first_offset == 1
    assert not manager.free_space.degraded


def test_coordinator_writes_use_half_the_floor(manager: LogManager, disk: Disk) -> None:
    offsets = manager.get_or_create_log(TopicPartition("__consumer_offsets", 0))
    disk.free = 12 * MiB  # below the floor, above half of it
    manager.check_free_space()
    with pytest.raises(LogDirBelowFloorError):
        offsets.append_as_leader(BATCH)  # a client's write (never allowed on this topic anyway)
    info = offsets.append_as_leader(BATCH, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0
    disk.free = 8 * MiB - 1  # below half the floor: even the coordinator is refused
    with pytest.raises(LogDirBelowFloorError):
        offsets.append_as_leader(BATCH, origin=AppendOrigin.COORDINATOR)


def test_far_above_the_floor_an_append_costs_no_measure(manager: LogManager, disk: Disk) -> None:
    lg = manager.get_or_create_log(TP)
    disk.calls = 0
    for _ in range(50):
        lg.append_as_leader(BATCH)
    assert disk.calls == 0  # 100 MiB free, floor 16 MiB: counted, not measured
    disk.free = 32 * MiB + 10  # the next batch brings it within twice the floor
    manager.free_space.measure_all()
    calls = disk.calls
    lg.append_as_leader(BATCH)
    assert disk.calls == calls + 1


def test_a_plain_append_counts_the_headroom_itself_and_measures_once_it_runs_out(
    manager: LogManager, disk: Disk
) -> None:
    """``Log.append_plain_as_leader`` (the common Produce's) counts the dir's headroom down
    without the guard's call: the same refusals as ``check_append``."""
    lg = manager.get_or_create_log(TP)
    batch = build_batch([(manager.clock.milliseconds(), b"k", b"v" * 1000)])  # (in range)
    lg.append_as_leader(batch)  # (the segment's first batch: the reference path's)
    disk.calls = 0
    for i in range(1, 50):
        info = lg.append_plain_as_leader(batch, -1, 1 << 20)
        assert info is not None and info.first_offset == i
    assert disk.calls == 0  # counted, not measured
    disk.free = 32 * MiB + 10  # the next batch brings it within twice the floor
    manager.free_space.measure_all()
    disk.free = 16 * MiB - 100  # then below the floor: the next append measures and refuses
    with pytest.raises(LogDirBelowFloorError):
        lg.append_plain_as_leader(batch, -1, 1 << 20)
    assert lg.log_end_offset == 50 and manager.free_space.degraded
    disk.free = 100 * MiB  # freed: taken again, then counted again
    assert lg.append_plain_as_leader(batch, -1, 1 << 20) is not None
    calls = disk.calls
    assert lg.append_plain_as_leader(batch, -1, 1 << 20) is not None
    assert disk.calls == calls and not manager.free_space.degraded
    # a fault plan's override (set with headroom left) is read by the very next append
    manager.free_space.override = lambda path: JUST_BELOW_FLOOR
    with pytest.raises(LogDirBelowFloorError):
        lg.append_plain_as_leader(batch, -1, 1 << 20)
    assert lg.log_end_offset == 52
    manager.free_space.override = None
    manager.free_space.measure_all()
    assert lg.append_plain_as_leader(batch, -1, 1 << 20) is not None


def test_the_periodic_check_flags_a_dir_and_runs_retention_while_degraded(
    manager: LogManager, disk: Disk
) -> None:
    lg = manager.get_or_create_log(TP)
    for _ in range(3):
        lg.append_as_leader(BATCH)
        lg.roll()
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    manager.delete_records(TP, 3)  # the segments below 3 may go; retention removes them
    segments = len(lg.segments)
    disk.free = 1 * MiB
    manager.check_free_space()
    assert manager.free_space.degraded
    assert len(lg.segments) < segments  # deleted now, not at the next retention interval


def test_floor_zero_turns_it_off(tmp_path: Path) -> None:
    floor = FreeSpaceFloor(0, probe=lambda _p: (0, 1 << 30))
    floor.add_dir(tmp_path)
    floor.check_append(floor.dir_key(tmp_path), 1 << 20, coordinator=False)  # no error with 0 bytes free
    assert not floor.degraded


def test_the_real_probe_reads_the_file_system(tmp_path: Path) -> None:
    free, total = statvfs_probe(tmp_path)
    assert 0 < free <= total


def test_only_the_full_dir_refuses(tmp_path: Path) -> None:
    clock = ManualClock()
    config = LogManagerConfig.from_props({"log.dir.min.free.bytes": str(16 * MiB)})
    m = LogManager([tmp_path / "a", tmp_path / "b"], {}, clock=clock,
                   scheduler=ManualScheduler(clock), config=config,
                   cleaner_config=CleanerConfig(enable_cleaner=False))  # fmt: skip
    free = {tmp_path / "a": 100 * MiB, tmp_path / "b": 100 * MiB}
    m.free_space.probe = lambda path: (free[path], 1 << 30)
    m.startup()
    try:
        logs = [m.get_or_create_log(TopicPartition("t", p)) for p in range(2)]
        dirs = {Path(lg.dir).parent for lg in logs}
        assert len(dirs) == 2  # one partition per dir
        full = Path(logs[0].dir).parent
        free[full] = 1 * MiB
        m.check_free_space()
        with pytest.raises(LogDirBelowFloorError):
            logs[0].append_as_leader(BATCH)
        assert logs[1].append_as_leader(BATCH).first_offset == 0
        assert [str(d.path) for d in m.free_space.snapshot() if d.below_floor] == [str(full)]
    finally:
        m.shutdown()
