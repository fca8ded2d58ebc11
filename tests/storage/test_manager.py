"""LogManager: placement, loading, periodic tasks (ManualClock + ManualScheduler), lifecycle."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tidelog.config.core import ConfigError
from tidelog.records.batch import iter_batches
from tidelog.records.builder import build_batch
from tidelog.storage import manager as manager_module
from tidelog.storage import segment as segment_module
from tidelog.storage.checkpoints import CleanShutdownFile, OffsetCheckpointFile
from tidelog.storage.cleaner import CleanerConfig
from tidelog.storage.dir_lock import LogDirError
from tidelog.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from tidelog.storage.log import FetchIsolation, Log
from tidelog.storage.manager import (
    LogManager,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("events", 0)
# One ~80-byte batch per segment once a segment holds 5 of them.
SMALL = {"segment.bytes": "400", "index.interval.bytes": "1"}
CHECK_MS = 1000


class Env:
    """A LogManager over real dirs with a manual clock; ``restart()`` makes a new one."""

    def __init__(
        self,
        dirs: list[Path],
        defaults: Mapping[str, str] | None = None,
        cleaner_config: CleanerConfig | None = None,
    ) -> None:
        self.dirs = dirs
        # No cleaner threads by default: they would run retention on compacted logs
        # concurrently with the manual clock (tests below drive a cleaner explicitly).
        self.cleaner_config = cleaner_config or CleanerConfig(enable_cleaner=False)
        self.clock = ManualClock(1_700_000_000_000)
        self.defaults = dict(defaults or {})
        self.config = LogManagerConfig.from_props(
            {"log.retention.check.interval.ms": str(CHECK_MS), "log.initial.task.delay.ms": "0"}
        )
        self.manager = self._new()

    def _new(self) -> LogManager:
        self.scheduler = ManualScheduler(self.clock)
        return LogManager(
            self.dirs,
            self.defaults,
            clock=self.clock,
            scheduler=self.scheduler,
            config=self.config,
            cleaner_config=self.cleaner_config,
        )

    def start(self) -> LogManager:
        self.manager.startup()
        return self.manager

    def restart(self, clean: bool = True) -> LogManager:
        if clean:
            self.manager.shutdown()
        else:
            _crash(self.manager)
        self.manager = self._new()
        self.manager.startup()
        return self.manager


def _crash(manager: LogManager) -> None:
    """Simulate kill -9: drop the locks and file handles without flush/checkpoint/marker."""
    manager._cancel_tasks()
    manager._shut_down = True
    for lg in manager.all_logs():
        lg.segments.close_handlers() if hasattr(lg.segments, "close_handlers") else None
    manager._release_locks()


def append(lg: Log, n: int, ts: int, key: str = "k") -> list[int]:
    """Append ``n`` one-record batches with timestamp ``ts``; HW follows (single node)."""
    offsets = []
    for i in range(n):
        info = lg.append_as_leader(build_batch([(ts, f"{key}{i}".encode(), b"v" * 20)]))
        offsets.append(info.first_offset)
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return offsets


def segment_bases(lg: Log) -> list[int]:
    return [s.base_offset for s in lg.segments.values()]


def read_values(lg: Log, start: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = start
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END)
        data = info.records.read() if info.records is not None else b""
        if not data:
            break
        for batch in iter_batches(memoryview(data), 0, len(data)):
            for rec in batch.iter_records():
                out[rec.offset] = bytes(rec.value) if rec.value is not None else b""
            offset = batch.last_offset + 1
    return out


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env([tmp_path / "d1"], SMALL)
    e.start()
    yield e
    e.manager.shutdown()


# -- placement and dirs ------------------------------------------------------------------------


def test_create_log_makes_partition_dir_once(env: Env, tmp_path: Path) -> None:
    lg = env.manager.get_or_create_log(TP)
    assert Path(lg.dir) == (tmp_path / "d1" / "events-0").resolve()
    assert (tmp_path / "d1" / "events-0" / "00000000000000000000.log").exists()
    assert env.manager.get_or_create_log(TP) is lg
    assert env.manager.get_log(TP) is lg
    assert env.manager.get_log(TopicPartition("events", 1)) is None
    assert env.manager.all_logs() == [lg]
    with pytest.raises(ValueError, match="characters"):
        env.manager.get_or_create_log(TopicPartition("bad topic", 0))


def test_least_loaded_placement_across_three_dirs(tmp_path: Path) -> None:
    e = Env([tmp_path / "a", tmp_path / "b", tmp_path / "c"])
    e.start()
    for p in range(20):
        e.manager.get_or_create_log(TopicPartition("t", p))
    counts = [len([x for x in d.iterdir() if x.is_dir()]) for d in e.dirs]
    assert sum(counts) == 20
    assert max(counts) - min(counts) <= 1
    e.manager.shutdown()


def test_placement_counts_logs_still_being_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two creations in flight at once (the lock is not held across Log.open) go to different
    dirs: the second placement counts the first one's dir, as Kafka's does."""
    e = Env([tmp_path / "a", tmp_path / "b"])
    m = e.start()
    real_open = manager_module.Log.open
    first_opening, release = threading.Event(), threading.Event()

    def slow_open(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.name == "t-0":
            first_opening.set()
            assert release.wait(30)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(manager_module.Log, "open", slow_open)
    first = threading.Thread(target=m.get_or_create_log, args=(TopicPartition("t", 0),))
    first.start()
    assert first_opening.wait(30)
    second = m.get_or_create_log(TopicPartition("t", 1))
    release.set()
    first.join(30)
    zeroth = m.get_log(TopicPartition("t", 0))
    assert zeroth is not None
    assert {Path(zeroth.dir).parent.name, Path(second.dir).parent.name} == {"a", "b"}
    m.shutdown()


def test_overlong_topic_name_create_and_delete(env: Env, tmp_path: Path) -> None:
    tp = TopicPartition("o" * 249, 5)
    env.manager.get_or_create_log(tp)
    renamed = env.manager.delete_log(tp)
    assert renamed is not None
    assert len(renamed.name) == 255
    assert renamed.name.endswith("-delete")


def test_same_partition_in_two_dirs_is_a_startup_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "t-0").mkdir(parents=True)
    (b / "t-0").mkdir(parents=True)
    e = Env([a, b])
    with pytest.raises(LogDirError) as info:
        e.manager.startup()
    assert str((a / "t-0").resolve()) in str(info.value)
    assert str((b / "t-0").resolve()) in str(info.value)
    # The failed manager released its locks: a new one can lock the dirs.
    LogManager([a, b], {}, clock=e.clock, scheduler=e.scheduler).shutdown()


def test_stray_directory_is_a_clear_startup_error(tmp_path: Path) -> None:
    (tmp_path / "d" / "not_a_partition").mkdir(parents=True)
    e = Env([tmp_path / "d"])
    with pytest.raises(
        LogDirError, match=re.escape(str((tmp_path / "d").resolve())) + ".*not_a_partition"
    ):
        e.manager.startup()


def test_the_remote_index_cache_dir_is_not_a_partition(tmp_path: Path) -> None:
    """Kafka's LogManager skips ``remote-log-index-cache`` (tiered storage's index files)."""
    cache = tmp_path / "d" / "remote-log-index-cache"
    cache.mkdir(parents=True)
    (cache / "0_x.index").write_bytes(b"")
    e = Env([tmp_path / "d"])
    e.manager.startup()
    try:
        assert e.manager.all_logs() == [] and cache.is_dir()
    finally:
        e.manager.shutdown()


def test_duplicate_and_locked_dirs(tmp_path: Path) -> None:
    clock = ManualClock()
    with pytest.raises(LogDirError, match="Duplicate log directory"):
        LogManager([tmp_path, tmp_path / "."], {}, clock=clock, scheduler=ManualScheduler(clock))
    first = LogManager([tmp_path], {}, clock=clock, scheduler=ManualScheduler(clock))
    with pytest.raises(LogDirError, match="Failed to acquire lock"):
        LogManager([tmp_path], {}, clock=clock, scheduler=ManualScheduler(clock))
    first.shutdown()


# -- retention -------------------------------------------------------------------------------


def test_time_retention_deletes_through_dot_deleted(env: Env) -> None:
    m = env.manager
    lg = m.get_or_create_log(TP, {"retention.ms": "10000", "file.delete.delay.ms": "5000"})
    append(lg, 5, env.clock.milliseconds() - 20000)  # old records: segment 0
    old_bases = segment_bases(lg)
    append(lg, 5, env.clock.milliseconds())  # fresh records
    assert len(segment_bases(lg)) >= 2
    part_dir = Path(lg.dir)
    env.clock.advance(CHECK_MS)  # next retention check
    assert lg.log_start_offset > 0
    assert segment_bases(lg)[0] == lg.log_start_offset
    deleted = sorted(p.name for p in part_dir.iterdir() if p.name.endswith(".deleted"))
    assert "00000000000000000000.log.deleted" in deleted
    assert not (part_dir / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 1000)
    env.clock.advance(5000)  # file.delete.delay.ms
    assert not [p for p in part_dir.iterdir() if p.name.endswith(".deleted")]
    assert old_bases[0] == 0


def test_size_retention_keeps_newest_segments(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP)
    append(lg, 20, env.clock.milliseconds())
    sizes = {s.base_offset: s.size for s in lg.segments.values()}
    assert len(sizes) >= 4
    limit = sum(sizes.values()) // 2
    env.manager.update_topic_config(TP.topic, {"retention.bytes": str(limit)})
    env.clock.advance(CHECK_MS)
    remaining = segment_bases(lg)
    assert remaining == sorted(sizes)[-len(remaining) :]  # the newest survive
    assert len(remaining) < len(sizes)
    kept = sum(sizes[b] for b in remaining)
    # Kafka (#77): whole oldest segments go while the log stays at or above retention.bytes,
    # so what is left exceeds the limit by less than its oldest segment.
    assert kept >= limit
    assert kept - sizes[remaining[0]] < limit
    assert lg.log_start_offset == remaining[0]
    assert sorted(read_values(lg, lg.log_start_offset)) == list(range(remaining[0], 20))


def test_with_a_cleaner_compacted_logs_get_retention_from_it(tmp_path: Path) -> None:
    e = Env([tmp_path / "d"], SMALL, CleanerConfig(num_threads=0))  # cleaner driven by hand
    m = e.start()
    assert m.cleaner is not None
    both = m.get_or_create_log(TP, {"cleanup.policy": "compact,delete", "retention.ms": "1"})
    append(both, 10, e.clock.milliseconds() - 100000)
    e.clock.advance(CHECK_MS)
    assert both.log_start_offset == 0  # the manager's retention leaves compacted logs alone
    m.cleaner.clean_once()
    assert both.log_start_offset > 0  # the cleaner ran their retention (#140)
    m.shutdown()


def test_delete_log_removes_it_from_cleaner_checkpoint(tmp_path: Path) -> None:
    e = Env([tmp_path / "d"], SMALL, CleanerConfig(num_threads=0))
    m = e.start()
    assert m.cleaner is not None
    lg = m.get_or_create_log(TP, {"cleanup.policy": "compact"})
    for i in range(12):
        lg.append_as_leader(build_batch([(e.clock.milliseconds(), b"same-key", b"v%d" % i)]))
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    assert m.cleaner.clean_once()
    cp = OffsetCheckpointFile(tmp_path / "d" / "cleaner-offset-checkpoint")
    assert TP in cp.read()
    m.delete_log(TP)
    assert TP not in cp.read()
    m.shutdown()


def test_cleaner_threads_start_and_stop_with_the_manager(tmp_path: Path) -> None:
    # Only this manager's threads: brokers of other tests in the same process may still be
    # winding down their own cleaner threads.
    before = {t for t in threading.enumerate() if "log-cleaner" in t.name}
    clock = ManualClock()
    m = LogManager([tmp_path], {}, clock=clock, scheduler=ManualScheduler(clock))
    m.startup()

    def cleaner_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if "log-cleaner" in t.name and t not in before]

    mine = cleaner_threads()
    assert len(mine) == 1  # log.cleaner.enable=true, log.cleaner.threads=1
    m.shutdown()
    assert not mine[0].is_alive()
    assert cleaner_threads() == []
    off = LogManager(
        [tmp_path], {"log.cleaner.enable": "false"}, clock=clock, scheduler=ManualScheduler(clock)
    )
    assert off.cleaner is None
    off.shutdown()


def test_retention_skips_compact_only_logs(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP, {"cleanup.policy": "compact", "retention.ms": "1"})
    append(lg, 10, env.clock.milliseconds() - 100000)
    before = segment_bases(lg)
    env.clock.advance(CHECK_MS)
    assert segment_bases(lg) == before
    both = env.manager.get_or_create_log(
        TopicPartition("both", 0), {"cleanup.policy": "compact,delete", "retention.ms": "1"}
    )
    append(both, 10, env.clock.milliseconds() - 100000)
    env.clock.advance(CHECK_MS)
    assert both.log_start_offset > 0


def test_topic_config_change_applies_live(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP)
    append(lg, 10, env.clock.milliseconds() - 3_600_000)
    env.clock.advance(CHECK_MS)
    assert lg.log_start_offset == 0  # 1 h old < 7 d default retention
    env.manager.update_topic_config(TP.topic, {"retention.ms": "60000"})
    assert lg.config.retention_ms == 60000
    assert env.manager.topic_overrides(TP.topic) == {"retention.ms": "60000"}
    env.clock.advance(CHECK_MS)
    assert lg.log_start_offset > 0
    with pytest.raises(ConfigError):
        env.manager.update_topic_config(TP.topic, {"retention.ms": "-5"})
    assert lg.config.retention_ms == 60000


def _created_while(env: Env, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], object],
                   tp: TopicPartition = TP) -> Log:
    """``tp``'s log, created on another thread while ``meanwhile`` runs in its Log.open
    (after the config to open with was chosen, before the log is published)."""
    opening, release = threading.Event(), threading.Event()
    real_open = Log.open

    def held_open(*args: Any, **kwargs: Any) -> Log:
        opening.set()
        assert release.wait(10)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(manager_module.Log, "open", held_open)
    made: list[Log] = []
    creator = threading.Thread(target=lambda: made.append(env.manager.get_or_create_log(tp)))
    creator.start()
    try:
        assert opening.wait(10)
        meanwhile()
    finally:
        release.set()
        creator.join(10)
        monkeypatch.setattr(manager_module.Log, "open", real_open)
    (lg,) = made
    assert env.manager.get_log(tp) is lg
    return lg


def test_topic_config_change_during_log_creation_reaches_the_log(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic's configs changed while one of its logs is being opened reach that log once
    it is published (Kafka's LogManager.topicConfigUpdated and finishedInitializingLog): a
    ZooKeeper broker's topic mirror can deliver a new topic's configs while its LeaderAndIsr
    creates the log with the configs known before, and the update listed no log to apply
    to (a tiered follower made without ``remote.storage.enable`` kept every segment)."""
    lg = _created_while(env, monkeypatch, lambda: env.manager.update_topic_config(
        TP.topic, {"retention.ms": "60000"}))
    assert lg.config.retention_ms == 60000
    assert env.manager.get_or_create_log(TopicPartition(TP.topic, 1)).config.retention_ms \
        == 60000  # and a later partition of the topic
    other = _created_while(env, monkeypatch, lambda: env.manager.update_topic_config(
        "other", {"retention.ms": "1000"}), TopicPartition("another", 0))
    assert other.config.retention_ms == 604_800_000  # another topic's change: its own


def test_overrides_read_before_a_config_change_do_not_undo_it(env: Env) -> None:
    """Overrides a caller read (at ``overrides_version``) before the topic's configs were
    changed live are older than the change: neither a new log nor a loaded one takes them,
    whichever arrives first; overrides read after the change apply as before."""
    manager = env.manager
    read_at = manager.overrides_version(TP.topic)
    manager.update_topic_config(TP.topic, {"retention.ms": "60000"})
    lg = manager.get_or_create_log(TP, {"retention.ms": "1000"}, read_at)
    assert lg.config.retention_ms == 60000
    again = manager.get_or_create_log(TP, {"retention.ms": "1000"}, read_at)  # loaded
    assert again is lg and lg.config.retention_ms == 60000
    assert manager.topic_overrides(TP.topic) == {"retention.ms": "60000"}
    newer = manager.overrides_version(TP.topic)
    manager.get_or_create_log(TP, {"retention.ms": "5000"}, newer)
    assert lg.config.retention_ms == 5000  # read after the change: the newest
    other = TopicPartition("another", 0)  # another topic's change does not stale these
    read_other = manager.overrides_version(other.topic)
    manager.update_topic_config(TP.topic, {"retention.ms": "7000"})
    assert manager.get_or_create_log(other, {"retention.ms": "2000"}, read_other) \
        .config.retention_ms == 2000


def test_broker_default_change_during_log_creation_reaches_the_log(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for new broker-level log defaults (Kafka's brokerConfigUpdated)."""
    lg = _created_while(env, monkeypatch, lambda: env.manager.update_broker_log_defaults(
        {**SMALL, "log.retention.ms": "60000"}))
    assert lg.config.retention_ms == 60000


# -- delete records, log start offset checkpoint -----------------------------------------------


def test_delete_records_bounded_by_high_watermark(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP)
    append(lg, 10, env.clock.milliseconds())
    lg.append_as_leader(build_batch([(env.clock.milliseconds(), b"x", b"y")]))  # above HW
    with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
        env.manager.delete_records(TP, 11)
    assert env.manager.delete_records(TP, 4) == 4
    assert env.manager.delete_records(TP, 2) == 4  # below the start: ignored
    assert env.manager.delete_records(TP, -1) == 10  # -1 = up to the high watermark
    with pytest.raises(UnknownTopicOrPartitionError):
        env.manager.delete_records(TopicPartition("nope", 0), 1)
    compacted = env.manager.get_or_create_log(
        TopicPartition("compacted", 0), {"cleanup.policy": "compact"}
    )
    append(compacted, 3, env.clock.milliseconds())
    with pytest.raises(PolicyViolationError, match="configured policy"):
        env.manager.delete_records(TopicPartition("compacted", 0), 1)
    assert compacted.log_start_offset == 0


def test_log_start_offset_checkpoint_survives_restart(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP)
    append(lg, 15, env.clock.milliseconds())
    bases = segment_bases(lg)
    assert len(bases) >= 3
    inside = bases[1] + 1  # not a segment boundary
    env.manager.delete_records(TP, inside)
    cp = OffsetCheckpointFile(env.dirs[0] / "log-start-offset-checkpoint")
    assert cp.read() == {}  # written by the periodic task, not at once (as in Kafka)
    env.clock.advance(60000)  # log-start-offset checkpoint interval
    assert cp.read() == {TP: inside}
    m = env.restart(clean=False)  # even after a crash the checkpointed start offset holds
    lg = m.get_or_create_log(TP)
    assert lg.log_start_offset == inside
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(inside - 1, 1000)
    assert min(read_values(lg, inside)) == inside
    env.clock.advance(CHECK_MS)  # retention drops whole segments below the start offset
    assert segment_bases(lg)[0] == bases[1]
    env.clock.advance(60000)
    assert cp.read() == {TP: inside}  # still above the first segment's base
    lg.maybe_increment_high_watermark(lg.log_end_offset)  # what a single-node leader does
    env.manager.delete_records(TP, bases[2])  # exactly a segment boundary
    env.clock.advance(60000)  # retention runs first at this tick, then the checkpoint
    assert segment_bases(lg)[0] == bases[2]
    assert cp.read() == {}  # no longer above the first segment's base (#82)
    env.restart()
    lg = env.manager.get_or_create_log(TP)
    assert lg.log_start_offset == bases[2]


# -- flusher and recovery-point checkpoint -----------------------------------------------------


def test_time_based_flush_and_recovery_point_checkpoint(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP, {"flush.ms": "5000"})
    append(lg, 3, env.clock.milliseconds())
    assert lg.recovery_point == 0
    env.clock.advance(4000)
    assert lg.recovery_point == 0  # flush.ms not reached
    env.clock.advance(1000)
    assert lg.recovery_point == 3
    cp = OffsetCheckpointFile(env.dirs[0] / "recovery-point-offset-checkpoint")
    env.clock.advance(60000)
    assert cp.read() == {TP: 3}


# -- deletion of partitions --------------------------------------------------------------------


def test_delete_log_renames_then_removes_after_delay(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP, {"file.delete.delay.ms": "30000"})
    append(lg, 3, env.clock.milliseconds())
    env.manager.get_or_create_log(TopicPartition("other", 0))
    renamed = env.manager.delete_log(TP)
    assert renamed is not None and renamed.exists()
    assert re.fullmatch(r"events-0\.[0-9a-f]{32}-delete", renamed.name)
    assert not (env.dirs[0] / "events-0").exists()
    assert env.manager.get_log(TP) is None
    cp = OffsetCheckpointFile(env.dirs[0] / "recovery-point-offset-checkpoint")
    assert TP not in cp.read()
    env.clock.advance(29999)
    assert renamed.exists()
    env.clock.advance(1)
    assert not renamed.exists()
    assert env.manager.delete_log(TP) is None


def test_delete_dirs_found_at_startup_are_removed_after_delay(tmp_path: Path) -> None:
    e = Env([tmp_path / "d"], {"file.delete.delay.ms": "1000"})
    e.start()
    lg = e.manager.get_or_create_log(TP)
    append(lg, 2, e.clock.milliseconds())
    renamed = e.manager.delete_log(TP)
    assert renamed is not None
    m = e.restart()  # shutdown cancels the pending delete; the new manager queues it again
    assert renamed.exists()
    assert m.logs_pending_delete() == [renamed]
    assert m.get_log(TP) is None
    e.clock.advance(1000)
    assert not renamed.exists()
    m.shutdown()


# -- shutdown and restart ----------------------------------------------------------------------


class RecoverCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = segment_module.LogSegment.recover

        def counting(seg: Any, *args: Any, **kwargs: Any) -> int:
            self.calls += 1
            return original(seg, *args, **kwargs)

        monkeypatch.setattr(segment_module.LogSegment, "recover", counting)


def _fill(m: LogManager, clock: ManualClock, partitions: int, batches: int) -> None:
    for p in range(partitions):
        append(m.get_or_create_log(TopicPartition("t", p)), batches, clock.milliseconds())


def test_clean_shutdown_skips_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = Env([tmp_path / "d"], SMALL)
    e.start()
    _fill(e.manager, e.clock, 3, 12)
    counter = RecoverCounter(monkeypatch)
    e.manager.shutdown()
    marker = CleanShutdownFile(tmp_path / "d")
    assert marker.exists()
    rp = OffsetCheckpointFile(tmp_path / "d" / "recovery-point-offset-checkpoint").read()
    assert rp == {TopicPartition("t", p): 12 for p in range(3)}
    e.manager = e._new()
    e.manager.startup()
    assert not marker.exists()  # removed before loading: a crash now would be unclean
    assert counter.calls == 0  # no segment re-validated
    for p in range(3):
        lg = e.manager.get_log(TopicPartition("t", p))
        assert lg is not None and lg.log_end_offset == 12
    e.manager.shutdown()


def test_unclean_shutdown_recovers_from_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    e = Env([tmp_path / "d"], SMALL)
    e.start()
    _fill(e.manager, e.clock, 2, 12)
    e.clock.advance(60000)  # recovery points checkpointed (flushed only up to 0 so far)
    counter = RecoverCounter(monkeypatch)
    m = e.restart(clean=False)
    assert counter.calls > 0
    for p in range(2):
        lg = m.get_log(TopicPartition("t", p))
        assert lg is not None and lg.log_end_offset == 12
        assert len(read_values(lg, 0)) == 12
    m.shutdown()


@pytest.mark.parametrize(
    "garbage",
    [b"0\n5\nt 0 12\n", b"7\n1\nt 0 3\n", b"0\n1\nt 0", b"\x00\xff\xfe", b"0\n2\nt 0 1\nt 1 x\n"],
)
def test_corrupt_checkpoints_are_survived(
    tmp_path: Path, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    e = Env([tmp_path / "d"], SMALL)
    e.start()
    _fill(e.manager, e.clock, 2, 12)
    e.manager.delete_records(TopicPartition("t", 0), 3)
    e.manager.shutdown()
    d = tmp_path / "d"
    (d / "recovery-point-offset-checkpoint").write_bytes(garbage)
    (d / "log-start-offset-checkpoint").write_bytes(garbage)
    (d / ".kafka_cleanshutdown").unlink()  # and it was a crash
    e.manager = e._new()
    with caplog.at_level(logging.WARNING):
        e.manager.startup()
    assert "recovery-point-offset-checkpoint" in caplog.text
    assert "log-start-offset-checkpoint" in caplog.text
    assert "resetting the recovery points to 0" in caplog.text
    lg0 = e.manager.get_log(TopicPartition("t", 0))
    assert lg0 is not None and lg0.log_start_offset == segment_bases(lg0)[0]
    for p in range(2):
        lg = e.manager.get_log(TopicPartition("t", p))
        assert lg is not None
        assert lg.log_end_offset == 12
        assert sorted(read_values(lg, lg.log_start_offset)) == list(range(lg.log_start_offset, 12))
    e.manager.shutdown()


def test_shutdown_before_startup_writes_no_marker(tmp_path: Path) -> None:
    e = Env([tmp_path / "d"])
    e.start()
    lg = e.manager.get_or_create_log(TP)
    append(lg, 10, e.clock.milliseconds())
    e.manager.delete_records(TP, 4)
    e.manager.shutdown()
    CleanShutdownFile(tmp_path / "d").delete()
    before = {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir() if p.is_file()}
    assert before["log-start-offset-checkpoint"] == b"0\n1\nevents 0 4\n"
    e.manager = e._new()
    with pytest.raises(KafkaStorageError, match="not started"):
        e.manager.get_or_create_log(TP)
    e.manager.shutdown()
    with pytest.raises(KafkaStorageError, match="shut down"):
        e.manager.get_or_create_log(TP)
    after = {p.name: p.read_bytes() for p in (tmp_path / "d").iterdir() if p.is_file()}
    assert after == before  # checkpoints kept, no marker
    assert not CleanShutdownFile(tmp_path / "d").exists()


def test_clean_shutdown_marker_records_broker_epoch(tmp_path: Path) -> None:
    clock = ManualClock()
    m = LogManager([tmp_path], {}, clock=clock, scheduler=ManualScheduler(clock), broker_epoch=3)
    m.startup()
    m.shutdown()
    assert CleanShutdownFile(tmp_path).read_broker_epoch() == 3


def test_truncate_to_checkpoints_recovery_points(env: Env) -> None:
    lg = env.manager.get_or_create_log(TP)
    append(lg, 10, env.clock.milliseconds())
    lg.flush()
    env.manager.truncate_to({TP: 4})
    assert lg.log_end_offset == 4
    cp = OffsetCheckpointFile(env.dirs[0] / "recovery-point-offset-checkpoint")
    assert cp.read() == {TP: lg.recovery_point}
    assert lg.recovery_point <= 4
    env.manager.truncate_to({TopicPartition("absent", 0): 3})  # skipped, like Kafka
    env.manager.truncate_fully_and_start_at(TP, 100)
    assert (lg.log_start_offset, lg.log_end_offset) == (100, 100)


def test_topic_configs_source_used_at_load(tmp_path: Path) -> None:
    e = Env([tmp_path / "d"])
    e.start()
    e.manager.get_or_create_log(TP, {"retention.ms": "1234"})
    e.manager.shutdown()
    clock = ManualClock()
    m = LogManager(
        [tmp_path / "d"],
        {},
        clock=clock,
        scheduler=ManualScheduler(clock),
        topic_configs={"events": {"retention.ms": "1234"}},
    )
    m.startup()
    lg = m.get_log(TP)
    assert lg is not None and lg.config.retention_ms == 1234
    m.shutdown()


def test_unusable_dir_is_offline_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "bad"
    bad.write_text("a file, not a directory")
    good = tmp_path / "good"
    clock = ManualClock()
    with caplog.at_level(logging.ERROR):
        m = LogManager([bad, good], {}, clock=clock, scheduler=ManualScheduler(clock))
    assert f"Log directory {bad.resolve()} is offline" in caplog.text
    assert m.live_log_dirs == [good.resolve()]
    m.startup()
    for p in range(3):
        assert Path(m.get_or_create_log(TopicPartition("t", p)).dir).parent == good.resolve()
    m.shutdown()
    assert bad.read_text() == "a file, not a directory"
    with pytest.raises(LogDirError, match="all log dirs"):
        LogManager([bad], {}, clock=clock, scheduler=ManualScheduler(clock))


def test_create_falls_back_to_next_dir_when_one_fails(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    e = Env([a, b])
    m = e.start()
    (a / "t-0").write_text("in the way")  # mkdir of the partition dir fails in a
    lg = m.get_or_create_log(TopicPartition("t", 0))
    assert Path(lg.dir) == (b / "t-0").resolve()
    assert (a / "t-0").read_text() == "in the way"
    m.shutdown()


def test_cleanup_segments_to_maintain_size_like_kafka(tmp_path: Path) -> None:
    """LogManagerTest#testCleanupSegmentsToMaintainSize: 200 one-record batches, 10 per
    segment, retention.bytes = 50 batches + 10 bytes -> 6 segments remain (#147)."""
    e = Env([tmp_path / "d"])
    m = e.start()
    batch = build_batch([(e.clock.milliseconds(), b"k0000", b"v" * 20)])
    size = len(batch)
    lg = m.get_or_create_log(
        TP, {"segment.bytes": str(10 * size), "retention.bytes": str(50 * size + 10)}
    )
    for i in range(200):
        lg.append_as_leader(build_batch([(e.clock.milliseconds(), b"k%04d" % i, b"v" * 20)]))
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    assert len(segment_bases(lg)) == 20
    e.clock.advance(CHECK_MS)
    assert len(segment_bases(lg)) == 6
    assert lg.log_start_offset == 140
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 1024)
    m.shutdown()
