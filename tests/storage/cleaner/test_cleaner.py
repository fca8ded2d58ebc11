"""Cleaner over real Logs: Kafka's LogCleanerTest behaviours #132-#139."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cleaner_helpers import (
    append,
    append_each,
    append_marker,
    batches,
    clean,
    kov,
    make_cleaner,
    open_log,
    read_records,
)

from tidelog.records import CompressionType, ControlRecordType, RecordBatchBuilder
from tidelog.storage.cleaner.cleaner import group_segments_by_size
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Iterator[Log]:
    lg = open_log(tmp_path / "compacted-0", clock)
    yield lg
    lg.close()


def k(i: int) -> bytes:
    return f"key{i}".encode()


def v(i: int) -> bytes:
    return f"value{i}".encode()


@pytest.mark.parametrize("codec", list(CompressionType))
def test_clean_keeps_latest_per_key_and_offsets(log: Log, clock: ManualClock,
                                                codec: CompressionType) -> None:
    for i in range(30):
        append(log, [(k(i % 5), v(i)), (k((i + 1) % 7), v(100 + i))], codec)
        if i % 10 == 9:
            log.roll()
    append(log, [(k(0), b"active")], codec)
    active_before = log.active_segment.log.read_at(0, log.active_segment.size)
    original = {r[0]: r for r in kov(log)}
    end = clean(make_cleaner(clock), log)
    assert end == log.active_segment.base_offset
    got = kov(log)
    offsets = [o for o, _k, _v in got]
    assert offsets == sorted(set(offsets))
    assert all(original[r[0]] == r for r in got)
    cleaned = [r for r in got if r[0] < end]
    latest: dict[bytes | None, int] = {}
    for o, key, _val in sorted(original.values()):
        if o < end:
            latest[key] = o
    assert sorted(o for o, *_ in cleaned) == sorted(latest.values())
    assert [r for r in got if r[0] >= end] == [original[end]]
    assert log.active_segment.log.read_at(0, log.active_segment.size) == active_before
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def test_build_partial_offset_map(log: Log, clock: ManualClock) -> None:
    """#132: capacity 3, load factor 0.75, from offset 2 over keys 0..4."""
    append_each(log, [(k(i), v(i)) for i in range(5)])
    log.roll()
    cleaner = make_cleaner(clock, slots=3, load_factor=0.75)
    from tidelog.storage.cleaner.cleaner import CleanerStats

    stats = CleanerStats()
    cleaner.build_offset_map(log, 2, log.active_segment.base_offset, stats)
    m = cleaner.offset_map
    assert (m.get(k(2)), m.get(k(3)), m.get(k(0)), m.get(k(4))) == (2, 3, -1, -1)
    assert m.latest_offset == 3
    assert stats.map_messages_read == 4


def test_partial_map_cleans_up_to_latest_offset_then_continues(log: Log,
                                                               clock: ManualClock) -> None:
    # keys 0..9 twice; a map of 4 usable entries only covers part of the dirty range.
    append_each(log, [(k(i % 10), v(i)) for i in range(20)])
    log.roll()
    cleaner = make_cleaner(clock, slots=5, load_factor=0.8)
    end = clean(cleaner, log)
    assert end == 4  # keys 0..3 mapped at offsets 0..3; the round ends at latest + 1
    assert [o for o, *_ in kov(log)] == list(range(20))  # nothing superseded inside [0, 4)
    end2 = clean(cleaner, log, first_dirty=end)
    assert end2 == 8
    ends = end2
    while ends < log.active_segment.base_offset:
        ends = clean(cleaner, log, first_dirty=ends)
    assert [(o, key) for o, key, _ in kov(log)] == [(10 + i, k(i)) for i in range(10)]


def test_keyless_records_dropped_and_counted(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path / "keyless-0", clock, cleanup_policy="delete")
    append(lg, [(None, b"a"), (k(1), b"b"), (None, b"c")])
    append(lg, [(k(1), b"d")])
    lg.roll()
    lg.update_config(lg.config.with_overrides(cleanup_policy=["compact"]))
    cleaner = make_cleaner(clock)
    from tidelog.storage.cleaner.cleaner import LogToClean

    _end, stats = cleaner.clean(LogToClean(lg.topic_partition, lg, 0,  # type: ignore[arg-type]
                                           lg.active_segment.base_offset))
    assert kov(lg) == [(3, k(1), b"d")]
    assert stats.invalid_messages_read == 2
    lg.close()


def test_tombstones_get_a_horizon_then_go(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path / "tomb-0", clock, delete_retention_ms=1000)
    append(lg, [(k(1), v(1))])
    append(lg, [(k(1), None)], ts=0)  # an ancient timestamp does not matter (#134)
    append(lg, [(k(2), v(2))])
    lg.roll()
    cleaner = make_cleaner(clock)
    end = clean(cleaner, lg)
    assert kov(lg) == [(1, k(1), None), (2, k(2), v(2))]
    tomb = next(b for b in batches(lg) if b.base_offset == 1)
    assert tomb.delete_horizon_ms == clock.milliseconds() + 1000
    # A later pass before the horizon keeps it; one at/after the horizon drops it.
    append(lg, [(k(3), v(3))])
    lg.roll()
    clock.advance(999)
    end = clean(cleaner, lg, first_dirty=end)
    assert (1, k(1), None) in kov(lg)
    append(lg, [(k(4), v(4))])
    lg.roll()
    clock.advance(1)
    clean(cleaner, lg, first_dirty=end)
    assert [o for o, *_ in kov(lg)] == [2, 3, 4]
    lg.close()


def _idempotent(lg: Log, key: int, value: int, pid: int, seq: int) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq)
    b.append(lg.clock.milliseconds(), k(key), v(value))
    info = lg.append_as_leader(b.build())
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return info.first_offset


def test_retains_producer_last_sequence(tmp_path: Path, clock: ManualClock) -> None:
    """#135 (testLogCleanerRetainsProducerLastSequence, testDuplicateCheckAfterCleaning)."""
    d = tmp_path / "pids-0"
    lg = open_log(d, clock)
    append(lg, [(k(0), v(0))])
    _idempotent(lg, 0, 1, pid=1, seq=0)
    _idempotent(lg, 0, 2, pid=2, seq=0)
    _idempotent(lg, 0, 3, pid=3, seq=0)
    _idempotent(lg, 1, 1, pid=2, seq=1)
    lg.roll()
    clean(make_cleaner(clock), lg)
    bs = [b for b in batches(lg) if b.records_count or b.base_offset < 5]
    assert [b.last_offset for b in bs] == [1, 3, 4]
    assert {b.producer_id: b.last_sequence for b in bs} == {1: 0, 2: 1, 3: 0}
    assert [r.key for r in read_records(lg)] == [k(0), k(1)]
    assert [r.offset for r in read_records(lg)] == [3, 4]
    lg.close()
    lg = open_log(d, clock)
    b = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0)
    b.append(clock.milliseconds(), k(0), v(1))
    info = lg.append_as_leader(b.build())
    assert info.duplicate and (info.first_offset, info.last_offset) == (1, 1)
    lg.close()


def test_round_last_batch_kept_as_empty_header(log: Log, clock: ManualClock) -> None:
    append_each(log, [(k(1), v(1)), (k(2), v(2)), (k(1), v(3))])
    append(log, [(k(2), v(4))])
    log.roll()
    append(log, [(k(1), v(5))])  # supersedes offset 2 only from the active segment
    clean(make_cleaner(clock), log)
    assert [(o, key) for o, key, _ in kov(log)] == [(2, k(1)), (3, k(2)), (4, k(1))]


def _txn(lg: Log, pid: int, records: list[tuple[int, int]], seq: int) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                           is_transactional=True)
    for key, value in records:
        b.append(lg.clock.milliseconds(), k(key), v(value))
    info = lg.append_as_leader(b.build())
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return info.first_offset


def test_aborted_transaction_removed_marker_kept_then_removed(tmp_path: Path,
                                                              clock: ManualClock) -> None:
    """#136 (testAbortMarkerRemoval): aborted data goes at once; the ABORT marker stays while
    data of its transaction is in the range, then needs a horizon set by one pass to pass
    before another pass drops it."""
    lg = open_log(tmp_path / "txn-0", clock, delete_retention_ms=500)
    _txn(lg, 7, [(1, 1)], 0)                          # 0 (aborted)
    _txn(lg, 7, [(2, 2), (3, 3)], 1)                  # 1-2 (aborted)
    append_marker(lg, 7, 0, ControlRecordType.ABORT)  # 3
    _txn(lg, 7, [(3, 4)], 3)                          # 4 (committed)
    append_marker(lg, 7, 0, ControlRecordType.COMMIT)  # 5
    lg.roll()
    cleaner = make_cleaner(clock)
    end = clean(cleaner, lg)
    assert [r.key for r in read_records(lg) if not _is_marker(lg, r.offset)] == [k(3)]
    assert [b.base_offset for b in batches(lg) if b.records_count] == [3, 4, 5]
    seg0 = lg.segments.values()[0]
    assert [(t.producer_id, t.first_offset, t.last_offset)
            for t in seg0.txn_index.all_aborted_txns()] == [(7, 0, 3)]
    # Second pass: no data of the aborted transaction is left -> the marker gets a horizon.
    end = clean(cleaner, lg, first_dirty=end)
    marker = next(b for b in batches(lg) if b.base_offset == 3)
    assert marker.records_count == 1
    assert marker.delete_horizon_ms == clock.milliseconds() + 500
    # A pass at the horizon drops it.
    clock.advance(500)
    clean(cleaner, lg, first_dirty=end)
    assert [b.base_offset for b in batches(lg) if b.records_count] == [4, 5]
    assert [o for o, *_ in kov(lg)] == [4, 5]
    lg.close()


def _is_marker(lg: Log, offset: int) -> bool:
    return any(b.is_control and b.base_offset == offset for b in batches(lg))


def test_committed_transaction_kept(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path / "commit-0", clock)
    _txn(lg, 9, [(1, 1), (2, 2)], 0)
    append_marker(lg, 9, 0, ControlRecordType.COMMIT)
    append(lg, [(k(3), v(3))])
    lg.roll()
    clean(make_cleaner(clock), lg)
    assert [o for o, *_ in kov(lg)] == [0, 1, 2, 3]  # the COMMIT marker too
    assert any(b.is_control and b.records_count == 1 for b in batches(lg))
    lg.close()


def test_undecided_transaction_is_not_cleanable(tmp_path: Path, clock: ManualClock) -> None:
    from tidelog.storage.cleaner.manager import cleanable_offsets

    lg = open_log(tmp_path / "open-0", clock)
    _txn(lg, 3, [(1, 1)], 0)
    append(lg, [(k(2), v(2))])
    lg.roll()
    append(lg, [(k(2), v(3))])
    assert cleanable_offsets(lg, None, clock.milliseconds()).first_uncleanable_dirty_offset == 0
    append_marker(lg, 3, 0, ControlRecordType.ABORT)
    off = cleanable_offsets(lg, None, clock.milliseconds())
    assert off.first_uncleanable_dirty_offset == lg.active_segment.base_offset
    lg.close()


def test_segment_grouping(tmp_path: Path, clock: ManualClock) -> None:
    """#137: groups stay within segment.bytes and the index size."""
    lg = open_log(tmp_path / "group-0", clock, segment_bytes=300, index_interval_bytes=1)
    for i in range(40):
        append(lg, [(k(i), v(i))])
    segs = lg.segments.values()[:-1]
    sizes = [s.size for s in segs]
    groups = group_segments_by_size(segs, 700, 10_000, lg.active_segment.base_offset)
    assert [s for g in groups for s in g] == segs
    assert all(sum(s.size for s in g) <= 700 for g in groups)
    assert all(sum(s.size for s in g) + groups[i + 1][0].size > 700
               for i, g in enumerate(groups[:-1]))
    by_index = group_segments_by_size(segs, 10**9, 16, lg.active_segment.base_offset)
    assert all(sum(s.offset_index.size_in_bytes for s in g) <= 16 for g in by_index)
    assert len(by_index) > 1
    assert sum(sizes) > 700
    lg.close()


def test_cleaning_groups_into_fewer_segments(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path / "merge-0", clock)
    for i in range(60):
        append(lg, [(k(i % 6), v(i))])
        if i % 6 == 5:
            lg.roll()
    before = len(lg.segments)
    clean(make_cleaner(clock), lg)
    assert len(lg.segments) == 2 < before  # one cleaned segment + the active one
    assert [o for o, *_ in kov(lg)] == list(range(54, 60))
    lg.close()
    reopened = open_log(tmp_path / "merge-0", clock)
    assert [o for o, *_ in kov(reopened)] == list(range(54, 60))
    reopened.close()


def test_cleaning_beyond_missing_offsets(tmp_path: Path, clock: ManualClock) -> None:
    """#139: the round ends at the next segment's base even across an offset gap."""
    lg = open_log(tmp_path / "gap-0", clock)
    b = RecordBatchBuilder(base_offset=0)
    for i in range(10):
        b.append(clock.milliseconds(), k(i), v(i))
    lg.append_as_follower(b.build())
    lg.roll(11)
    f = RecordBatchBuilder(base_offset=11)
    f.append(clock.milliseconds(), k(1015), v(1015))
    lg.append_as_follower(f.build())
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    assert clean(make_cleaner(clock), lg) == 11 == lg.active_segment.base_offset
    lg.close()


def test_replaced_files_deleted_after_file_delete_delay(tmp_path: Path,
                                                       clock: ManualClock) -> None:
    sched = ManualScheduler(clock)
    sched.startup()
    lg = open_log(tmp_path / "delay-0", clock, file_delete_delay_ms=1000)
    lg.scheduler = sched
    append_each(lg, [(k(1), v(i)) for i in range(5)])
    lg.roll()
    clean(make_cleaner(clock), lg)
    names = sorted(p.name for p in lg.dir.iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000000.log" in names
    clock.advance(1000)
    assert not [p for p in lg.dir.iterdir() if p.name.endswith(".deleted")]
    assert [o for o, *_ in kov(lg)] == [4]
    lg.close()
    sched.shutdown()


def test_basic_transaction_aware_cleaning(tmp_path: Path, clock: ManualClock) -> None:
    """#136 (testBasicTransactionAwareCleaning): keys [3, 2], offsets [3, 6, 7, 8, 9], and
    the aborted-transaction list is unchanged by cleaning."""
    from tidelog.storage.cleaner.cleaner import collect_aborted_transactions

    lg = open_log(tmp_path / "txn2-0", clock)
    _txn(lg, 1, [(1, 1), (2, 2)], 0)                   # 0-1 aborted
    _txn(lg, 2, [(2, 3), (3, 4)], 0)                   # 2-3 committed
    _txn(lg, 1, [(3, 5), (4, 6)], 2)                   # 4-5 aborted
    append_marker(lg, 1, 0, ControlRecordType.ABORT)   # 6
    append_marker(lg, 2, 0, ControlRecordType.COMMIT)  # 7
    _txn(lg, 1, [(2, 7)], 4)                           # 8 committed
    append_marker(lg, 1, 0, ControlRecordType.COMMIT)  # 9
    aborted = collect_aborted_transactions(lg, lg.log_start_offset, lg.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(1, 0, 6)]
    lg.roll()
    clean(make_cleaner(clock), lg)
    records = read_records(lg)
    assert [r.offset for r in records] == [3, 6, 7, 8, 9]
    data = [r for r in records if not _is_marker(lg, r.offset)]
    assert [r.key for r in data] == [k(3), k(2)]
    assert collect_aborted_transactions(lg, lg.log_start_offset, lg.log_end_offset) == aborted
    lg.close()


def test_empty_batch_removal_with_sequence_reuse(tmp_path: Path, clock: ManualClock) -> None:
    """#135/#136 (testEmptyBatchRemovalWithSequenceReuse): the group coordinator reuses
    sequence 0; emptied transactional batches and markers still go, except the producer's
    last batch (kept empty) and a marker whose transaction still has a batch."""
    from tidelog.storage.validator import AppendOrigin

    lg = open_log(tmp_path / "reuse-0", clock, delete_retention_ms=1000)

    def coordinator_txn(key: int) -> None:
        b = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0,
                               is_transactional=True)
        b.append(clock.milliseconds(), k(key), v(key))
        lg.append_as_leader(b.build(), origin=AppendOrigin.REPLICATION)

    coordinator_txn(1)                                 # 0
    append_marker(lg, 1, 0, ControlRecordType.COMMIT)  # 1
    coordinator_txn(2)                                 # 2
    append_marker(lg, 1, 0, ControlRecordType.COMMIT)  # 3
    append(lg, [(k(1), v(10))])                        # 4
    append(lg, [(k(2), v(20))])                        # 5
    lg.roll()
    cleaner = make_cleaner(clock)
    clean(cleaner, lg)
    assert [r.offset for r in read_records(lg)] == [1, 3, 4, 5]
    assert [b.last_offset for b in batches(lg)] == [1, 2, 3, 4, 5]
    clean(cleaner, lg)  # sets the horizon of the first marker
    clock.advance(1001)
    clean(cleaner, lg)  # and this pass removes it
    assert [r.offset for r in read_records(lg)] == [3, 4, 5]
    assert [b.last_offset for b in batches(lg)] == [2, 3, 4, 5]
    lg.close()


def test_offset_map_too_small_to_make_progress_is_rejected(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="too small"):
        make_cleaner(clock, slots=1, load_factor=0.9)
    make_cleaner(clock, slots=2, load_factor=0.75)  # one entry: enough to progress
