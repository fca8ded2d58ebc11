"""LogCleanerManager and LogCleaner: checkpoints, dirty ratio, choice, states (#127-#131,
#139, #140), failure isolation and throttling."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cleaner_helpers import append, kov, open_log

from tidelog.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from tidelog.storage.cleaner import CleanerConfig, LogCleaner
from tidelog.storage.cleaner.cleaner import LogToClean
from tidelog.storage.cleaner.manager import (
    CleaningState,
    LogCleanerManager,
    Paused,
    cleanable_offsets,
)
from tidelog.storage.cleaner.throttler import Throttler
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

SMALL = CleanerConfig(dedupe_buffer_size=24 * 10_000, io_buffer_size=128 * 1024)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


class Logs:
    """A log dir with a dict of logs, as the LogManager would provide them."""

    def __init__(self, root: Path, clock: ManualClock) -> None:
        self.root = root
        self.clock = clock
        self.logs: dict[TopicPartition, Log] = {}

    def add(self, name: str, **props: object) -> Log:
        lg = open_log(self.root / name, self.clock, **props)
        assert lg.topic_partition is not None
        self.logs[lg.topic_partition] = lg
        return lg

    def close(self) -> None:
        for lg in self.logs.values():
            lg.close()


@pytest.fixture
def logs(tmp_path: Path, clock: ManualClock) -> Iterator[Logs]:
    ls = Logs(tmp_path, clock)
    yield ls
    ls.close()


def k(i: int) -> bytes:
    return f"key{i:04d}".encode()  # fixed width: equal-sized segments


def fill(lg: Log, n: int, keys: int, per_segment: int = 10) -> None:
    for i in range(n):
        append(lg, [(k(i % keys), f"v{i:04d}".encode())])
        if i % per_segment == per_segment - 1:
            lg.roll()


def checkpoint(root: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(root / CLEANER_OFFSET_CHECKPOINT_FILE).read()


def test_dirty_offset_reset_if_below_log_start(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0")
    fill(lg, 30, 30)
    lg.maybe_increment_log_start_offset(10, "test")
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    mgr.update_checkpoints(logs.root, (TopicPartition("t", 0), 3))
    off = cleanable_offsets(lg, 3, clock.milliseconds())
    assert (off.first_dirty_offset, off.force_update_checkpoint) == (10, True)
    mgr.grab_filthiest_compacted_log(clock.milliseconds())
    assert checkpoint(logs.root) == {TopicPartition("t", 0): 10}


def test_dirty_offset_reset_if_above_log_end(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0")
    fill(lg, 30, 30)
    off = cleanable_offsets(lg, 200, clock.milliseconds())
    assert (off.first_dirty_offset, off.force_update_checkpoint) == (0, True)


def test_cleanable_offsets_bounded_by_hw_active_and_lag(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0")
    fill(lg, 100, 100)
    lg.update_high_watermark(50)
    assert cleanable_offsets(lg, None, clock.milliseconds()).first_uncleanable_dirty_offset == 50
    lg.update_high_watermark(lg.log_end_offset)
    now = clock.milliseconds()
    assert cleanable_offsets(lg, None, now).first_uncleanable_dirty_offset == 100  # active
    lagged = logs.add("lag-0", min_compaction_lag_ms=60_000)
    fill(lagged, 20, 20)
    clock.advance(61_000)
    fill(lagged, 20, 20)  # segments 20 and 30 are younger than the lag
    off = cleanable_offsets(lagged, None, clock.milliseconds())
    assert off.first_uncleanable_dirty_offset == 20


def test_log_to_clean_ratio(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0")
    fill(lg, 40, 40)
    seg = lg.segments.values()
    ltc = LogToClean(TopicPartition("t", 0), lg, 20, lg.active_segment.base_offset)
    assert ltc.clean_bytes == seg[0].size + seg[1].size
    assert ltc.cleanable_bytes == seg[2].size + seg[3].size
    assert ltc.cleanable_ratio == pytest.approx(0.5)
    # An uncleanable section: only [20, 30) counts as cleanable.
    ltc2 = LogToClean(TopicPartition("t", 0), lg, 20, 30)
    assert ltc2.cleanable_bytes == seg[2].size


def test_grab_filthiest_and_never_chosen(logs: Logs, clock: ManualClock) -> None:
    a, b = logs.add("a-0"), logs.add("b-0")
    fill(a, 40, 40)
    fill(b, 40, 40)
    logs.add("empty-0")
    active_only = logs.add("active-0")
    append(active_only, [(k(1), b"x")])
    logs.add("plain-0", cleanup_policy="delete")
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    mgr.update_checkpoints(logs.root, (TopicPartition("a", 0), 30))  # a: ratio 1/4
    got = mgr.grab_filthiest_compacted_log(clock.milliseconds())
    assert got is not None and got.topic_partition == TopicPartition("b", 0)
    assert mgr.state_of(TopicPartition("b", 0)) == CleaningState.IN_PROGRESS
    assert mgr.grab_filthiest_compacted_log(clock.milliseconds()) is None  # a: 0.25 <= 0.5
    mgr.done_cleaning(TopicPartition("b", 0), logs.root, 40)
    assert checkpoint(logs.root)[TopicPartition("b", 0)] == 40
    mgr.mark_partition_uncleanable(logs.root, TopicPartition("a", 0))
    mgr.update_checkpoints(logs.root, remove=TopicPartition("a", 0))
    assert mgr.grab_filthiest_compacted_log(clock.milliseconds()) is None


def test_ratio_must_be_strictly_greater(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0", min_cleanable_dirty_ratio=0.5)
    fill(lg, 40, 40)
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    mgr.update_checkpoints(logs.root, (TopicPartition("t", 0), 20))  # exactly 0.5
    assert mgr.grab_filthiest_compacted_log(clock.milliseconds()) is None
    assert mgr.dirtiest_log_cleanable_ratio == pytest.approx(0.5)


def test_max_compaction_lag_forces_cleaning(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0", max_compaction_lag_ms=1000)
    fill(lg, 40, 40)
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    mgr.update_checkpoints(logs.root, (TopicPartition("t", 0), 30))  # ratio 0.25
    assert mgr.grab_filthiest_compacted_log(clock.milliseconds()) is None
    clock.advance(1001)
    got = mgr.grab_filthiest_compacted_log(clock.milliseconds())
    assert got is not None and got.needs_compaction_now


def test_pause_abort_resume_states(logs: Logs, clock: ManualClock) -> None:
    tp = TopicPartition("t", 0)
    logs.add("t-0")
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    mgr.abort_and_pause_cleaning(tp)
    assert mgr.state_of(tp) == Paused(1)
    mgr.abort_and_pause_cleaning(tp)
    assert mgr.state_of(tp) == Paused(2)
    mgr.resume_cleaning([tp])
    assert mgr.state_of(tp) == Paused(1)
    mgr.resume_cleaning([tp])
    assert mgr.state_of(tp) is None
    with pytest.raises(RuntimeError):
        mgr.resume_cleaning([tp])
    mgr.in_progress[tp] = CleaningState.IN_PROGRESS
    done = threading.Event()

    def abort() -> None:
        mgr.abort_cleaning(tp)
        done.set()

    t = threading.Thread(target=abort)
    t.start()
    # The abort waits until the cleaner gives the partition back.
    assert not done.wait(0.05)
    assert mgr.state_of(tp) == CleaningState.ABORTED
    mgr.done_cleaning(tp, logs.root, 5)
    t.join(5)
    assert done.is_set() and mgr.state_of(tp) is None
    assert tp not in checkpoint(logs.root)  # an aborted round does not checkpoint


def test_clean_once_checkpoints_and_next_round(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0")
    fill(lg, 40, 5)
    cleaner = LogCleaner(SMALL, [logs.root], lambda: logs.logs, clock)
    assert cleaner.clean_once()
    assert checkpoint(logs.root) == {TopicPartition("t", 0): 40}
    assert [o for o, *_ in kov(lg)] == list(range(35, 40))
    assert not cleaner.clean_once()  # nothing dirty any more


def test_failing_partition_marked_uncleanable_others_served(
        logs: Logs, clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    bad, good = logs.add("bad-0"), logs.add("good-0")
    fill(bad, 40, 5)
    fill(good, 30, 5)
    # Corrupt a byte inside the bad log's first batch: its CRC no longer matches.
    seg = bad.segments.values()[0]
    with open(seg.log.path, "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    cleaner = LogCleaner(SMALL, [logs.root], lambda: logs.logs, clock)
    with caplog.at_level(logging.WARNING):
        assert not cleaner.clean_once()  # bad (the filthiest) fails
    assert "Marking its partition (bad-0) as uncleanable" in caplog.text
    assert cleaner.manager.is_uncleanable(bad, TopicPartition("bad", 0))
    assert cleaner.clean_once()  # the thread keeps serving the others
    assert [o for o, *_ in kov(good)] == list(range(25, 30))
    # The failed round leaves the bad log's first dirty offset where it was (Kafka).
    assert checkpoint(logs.root) == {TopicPartition("good", 0): 30, TopicPartition("bad", 0): 0}
    del logs.logs[TopicPartition("bad", 0)]
    bad.close()
    cleaner.clean_once()
    assert not cleaner.manager.uncleanable.get(logs.root)  # forgotten once the log is gone


def test_retention_runs_on_compacted_logs_after_a_pass(logs: Logs, clock: ManualClock) -> None:
    lg = logs.add("t-0", cleanup_policy="compact,delete", retention_ms=10_000)
    fill(lg, 30, 30)
    clock.advance(20_000)
    append(lg, [(k(99), b"new")])
    cleaner = LogCleaner(SMALL, [logs.root], lambda: logs.logs, clock)
    cleaner.clean_once()
    assert lg.log_start_offset == 30
    assert [o for o, *_ in kov(lg)] == [30]


def test_throttler_sleeps_to_the_desired_rate(clock: ManualClock) -> None:
    t = Throttler(1000.0, clock, check_interval_ms=100)
    assert t.maybe_throttle(500) == 0  # no time elapsed yet
    clock.advance(200)
    start = clock.milliseconds()
    assert t.maybe_throttle(500) == 800  # 1000 bytes in 200 ms at 1000 B/s -> 1 s in total
    assert clock.milliseconds() - start == 800
    clock.advance(1000)
    assert t.maybe_throttle(10) == 0  # 10 B/s is under the rate


class TickingClock(ManualClock):
    """A manual clock where every reading costs 10 ms: work takes (deterministic) time."""

    def nanoseconds(self) -> int:
        self.advance(10)
        return super().nanoseconds()


def _throttled_round(root: Path, rate: float) -> tuple[int, int, int]:
    """(elapsed ms, I/O bytes, ms slept) of one cleaning round at ``rate`` bytes/s."""
    clock = TickingClock(1_700_000_000_000)
    logs = Logs(root, clock)
    fill(logs.add("t-0"), 400, 5)
    cfg = CleanerConfig(dedupe_buffer_size=24 * 1000, io_buffer_size=1024,
                        max_io_bytes_per_second=rate)
    cleaner = LogCleaner(cfg, [logs.root], lambda: logs.logs, clock)
    start = clock.milliseconds()
    assert cleaner.clean_once()
    elapsed = clock.milliseconds() - start
    stats = cleaner.last_stats[TopicPartition("t", 0)]
    logs.close()
    return elapsed, stats.map_bytes_read + stats.bytes_read + stats.bytes_written, \
        cleaner.throttler.total_sleep_ms


def test_cleaner_io_throttled(tmp_path: Path) -> None:
    free_ms, io, free_sleep = _throttled_round(tmp_path / "free", float("inf"))
    slow_ms, io2, slept = _throttled_round(tmp_path / "slow", 1000.0)
    assert io == io2 and free_sleep == 0 and slept > 0
    assert io / (free_ms / 1000) > 5000  # unthrottled, the same work runs much faster
    # Kafka's throttler checks every 300 ms, so the bytes of the last window are not slept
    # for; the round's average rate stays within 1.5x of the target.
    assert io / (slow_ms / 1000) <= 1500
    assert slow_ms == free_ms + slept


def test_cleaner_config_defaults_and_parsing() -> None:
    c = CleanerConfig.from_props({})
    assert (c.enable_cleaner, c.num_threads, c.dedupe_buffer_size, c.dedupe_buffer_load_factor,
            c.io_buffer_size, c.backoff_ms) == (True, 1, 134217728, 0.9, 524288, 15000)
    assert c.max_io_bytes_per_second > 1e300
    c2 = CleanerConfig.from_props({"log.cleaner.threads": "2",
                                   "log.cleaner.dedupe.buffer.size": "1000",
                                   "log.cleaner.enable": "false", "unrelated": "x"})
    assert (c2.num_threads, c2.dedupe_buffer_size_per_thread, c2.enable_cleaner) == (2, 500, False)
    from tidelog.config.core import ConfigError

    with pytest.raises(ConfigError):
        CleanerConfig.from_props({"log.cleaner.io.buffer.load.factor": "1.5"})


def test_threads_start_and_stop(logs: Logs) -> None:
    from tidelog.util.clock import SystemClock

    lg = logs.add("t-0")
    fill(lg, 40, 5)
    cfg = CleanerConfig(dedupe_buffer_size=24 * 1000, io_buffer_size=1024, backoff_ms=10)
    cleaner = LogCleaner(cfg, [logs.root], lambda: logs.logs, SystemClock())
    cleaner.startup()
    try:
        cp_path = logs.root / CLEANER_OFFSET_CHECKPOINT_FILE
        for _ in range(500):  # bounded poll for the background thread's first round
            if cp_path.exists() and checkpoint(logs.root):
                break
            threading.Event().wait(0.01)
        assert checkpoint(logs.root) == {TopicPartition("t", 0): 40}
    finally:
        cleaner.shutdown()
    assert not cleaner._threads


def test_segments_deleted_during_a_round_abort_it_without_marking(logs: Logs,
                                                                   clock: ManualClock) -> None:
    """Retention removing a segment the cleaner is rewriting must not resurrect it: the swap
    is abandoned (an abort, not a failure) and the next round cleans what is left."""
    from tidelog.util.scheduler import ManualScheduler

    lg = logs.add("t-0", cleanup_policy="compact,delete")
    sched = ManualScheduler(clock)
    sched.startup()
    lg.scheduler = sched  # as in a broker: deleted files stay readable for a while
    fill(lg, 40, 5)
    cleaner = LogCleaner(SMALL, [logs.root], lambda: logs.logs, clock)
    real_check = cleaner.manager.check_cleaning_aborted
    fired = []
    calls = []

    def retention_meanwhile(tp: TopicPartition | None) -> None:
        calls.append(tp)
        # Calls 1-4 come from mapping the 4 dirty segments; the 5th is while copying.
        if len(calls) == 5:
            fired.append(tp)
            lg.maybe_increment_log_start_offset(10, "test")
            lg.delete_old_segments()
        real_check(tp)

    cleaner.manager.check_cleaning_aborted = retention_meanwhile  # type: ignore[method-assign]
    assert cleaner.clean_once()  # worked on (Kafka counts an aborted round as one)
    assert fired
    assert not cleaner.manager.is_uncleanable(lg, TopicPartition("t", 0))
    assert lg.log_start_offset == 10
    assert [o for o, *_ in kov(lg)] == list(range(10, 40))  # untouched by the abandoned round
    assert not [p for p in lg.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert cleaner.clean_once()
    assert [o for o, *_ in kov(lg)] == list(range(35, 40))


def test_log_start_past_the_active_segment_base_is_not_chosen(logs: Logs,
                                                              clock: ManualClock) -> None:
    """#131 (testLogStartOffsetLargerThanActiveSegmentBaseOffset)."""
    lg = logs.add("t-0", cleanup_policy="compact,delete")
    fill(lg, 20, 20)
    append(lg, [(k(1), b"a"), (k(2), b"b"), (k(3), b"c")])  # the active segment: 20..22
    lg.maybe_increment_log_start_offset(22, "test")
    lg.delete_old_segments()
    assert lg.log_start_offset > lg.active_segment.base_offset
    mgr = LogCleanerManager([logs.root], lambda: logs.logs)
    assert mgr.grab_filthiest_compacted_log(clock.milliseconds()) is None
    off = cleanable_offsets(lg, None, clock.milliseconds())
    assert off.first_dirty_offset == off.first_uncleanable_dirty_offset == 22


def test_reconfigure_changes_the_throttle_at_once(logs: Logs) -> None:
    clock = TickingClock(1_700_000_000_000)
    logs.clock = clock
    cleaner = LogCleaner(CleanerConfig(max_io_bytes_per_second=1e12), [logs.root],
                         lambda: logs.logs, clock)
    clock.advance(1000)
    assert cleaner.throttler.maybe_throttle(1000) == 0  # far below 1e12 B/s
    cleaner.reconfigure({"log.cleaner.io.max.bytes.per.second": "1000"})
    assert cleaner.config.max_io_bytes_per_second == 1000.0
    clock.advance(1000)
    assert cleaner.throttler.maybe_throttle(5000) > 3000  # 5000 B in ~1 s at 1000 B/s
