"""Log retention, deleteRecords and truncation (behaviours #75-#86 of the reference)."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_log_support import T0, batch, clock, make_log, values_from  # noqa: F401

from tidelog.storage.errors import OffsetOutOfRangeError
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler

MakeLog = Callable[..., Log]
ONE = len(batch(b"0000000000"))


def five_per_segment(make_log: MakeLog, n: int = 15, scheduler: object = None,
                     **props: str) -> Log:
    """``n`` one-record batches, 5 per segment (Kafka's retention test layout)."""
    lg = make_log({"segment.bytes": str(5 * ONE), **props}, scheduler=scheduler)
    for i in range(n):
        lg.append_as_leader(batch(b"%010d" % i, ts=10))
    assert lg.segments.base_offsets() == list(range(0, n, 5))
    return lg


def test_nothing_deleted_without_high_watermark(make_log: MakeLog) -> None:
    # #75
    lg = five_per_segment(make_log, **{"retention.ms": "10000"})
    assert lg.delete_old_segments() == 0
    lg.update_high_watermark(7)  # only the first segment is below the HW
    assert lg.delete_old_segments() == 1
    assert lg.log_start_offset == 5


def test_time_based_retention(make_log: MakeLog) -> None:
    # #76 + #79: all 15 expired -> one empty segment at LEO, offsets unchanged
    lg = five_per_segment(make_log, **{"retention.ms": "10000"})
    lg.update_high_watermark(15)
    assert lg.delete_old_segments() == 3
    assert lg.segments.base_offsets() == [15]
    assert (lg.log_start_offset, lg.log_end_offset) == (15, 15)
    assert lg.delete_old_segments() == 0
    assert lg.append_as_leader(batch(b"next")).first_offset == 15


def test_time_retention_uses_record_timestamps(make_log: MakeLog, clock: ManualClock) -> None:
    lg = make_log({"segment.bytes": str(ONE), "retention.ms": "1000"})
    for i in range(3):
        lg.append_as_leader(batch(b"%010d" % i, ts=T0 + i * 1000))
    lg.update_high_watermark(3)
    clock.advance(1500)  # now = T0 + 1500: only the record at T0 is older than 1000 ms
    assert lg.delete_old_segments() == 1
    assert lg.log_start_offset == 1


def test_retention_floor_keeps_what_a_reader_still_needs(make_log: MakeLog) -> None:
    # an Iceberg topic's translator has committed offsets below 7 only: time retention
    # deletes the segment [0, 5) and keeps [5, 10), which holds offset 7, and all after it
    lg = five_per_segment(make_log, **{"retention.ms": "10000"})
    lg.update_high_watermark(15)
    floor = [7]
    lg.retention_floor = lambda: floor[0]
    assert lg.delete_old_segments() == 1
    assert lg.segments.base_offsets() == [5, 10]
    floor[0] = 15  # everything committed: the rest may go
    assert lg.delete_old_segments() == 2
    assert lg.log_start_offset == 15


def test_retention_floor_does_not_hold_delete_records(make_log: MakeLog) -> None:
    lg = five_per_segment(make_log)
    lg.update_high_watermark(15)
    lg.retention_floor = lambda: 0
    lg.maybe_increment_log_start_offset(10, "delete records")
    assert lg.delete_old_segments() == 2  # an explicit DeleteRecords is the admin's choice
    assert lg.segments.base_offsets() == [10]


@pytest.mark.parametrize(("records", "left"), [(10, 2), (15, 3)])
def test_size_based_retention(make_log: MakeLog, records: int, left: int) -> None:
    # #77 shouldDeleteSizeBasedSegments / ...WhenUnderRetentionSize
    lg = five_per_segment(make_log, **{"retention.bytes": str(records * ONE),
                                       "retention.ms": "-1"})
    lg.update_high_watermark(15)
    lg.delete_old_segments()
    assert len(lg.segments) == left


def test_compact_policy_only_deletes_below_log_start(make_log: MakeLog) -> None:
    # #78
    lg = five_per_segment(make_log, **{"cleanup.policy": "compact", "retention.ms": "1",
                                       "retention.bytes": "1"})
    lg.update_high_watermark(15)
    assert lg.delete_old_segments() == 0
    lg.maybe_increment_log_start_offset(6, "test")
    assert lg.delete_old_segments() == 1
    assert lg.segments.base_offsets() == [5, 10]


def test_delete_records_and_log_start_offset(make_log: MakeLog) -> None:
    # #81 testLogDeletionAfterDeleteRecords / testCannotIncrementLogStartOffsetPastHighWatermark
    lg = five_per_segment(make_log, **{"retention.ms": "-1"})
    with pytest.raises(OffsetOutOfRangeError):
        lg.maybe_increment_log_start_offset(1, "client")
    lg.update_high_watermark(15)
    for start, segs in ((1, 3), (6, 2), (15, 1)):
        lg.maybe_increment_log_start_offset(start, "client")
        lg.delete_old_segments()
        assert len(lg.segments) == segs
        with pytest.raises(OffsetOutOfRangeError):
            lg.read(start - 1, 100)
    assert not lg.maybe_increment_log_start_offset(3, "client")
    assert lg.log_start_offset == 15


def test_deleted_files_renamed_then_removed_after_delay(
        make_log: MakeLog, clock: ManualClock) -> None:
    # #80: .deleted at once, physically removed after file.delete.delay.ms; snapshots go too
    sched = ManualScheduler(clock)
    lg = five_per_segment(make_log, **{"retention.ms": "-1", "file.delete.delay.ms": "1000"},
                          scheduler=sched)
    lg.update_high_watermark(15)
    assert lg.producer_state.snapshot_offsets() == [5, 10]
    lg.maybe_increment_log_start_offset(10, "client")
    assert lg.delete_old_segments() == 2
    names = sorted(p.name for p in lg.dir.iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000005.log.deleted" in names
    assert "00000000000000000000.log" not in names
    assert lg.producer_state.snapshot_offsets() == [10]
    clock.advance(999)
    assert (lg.dir / "00000000000000000000.log.deleted").exists()
    clock.advance(1)
    assert not any(p.name.endswith(".deleted") for p in lg.dir.iterdir())
    assert [o for o, _ in values_from(lg, 10)] == [10, 11, 12, 13, 14]


def test_truncate_to(make_log: MakeLog) -> None:
    # #83 testTruncateTo
    lg = make_log()
    for i in range(10):
        lg.append_as_leader(batch(b"%d" % i))
    size10 = lg.size_in_bytes
    lg.update_high_watermark(10)
    assert not lg.truncate_to(10) and not lg.truncate_to(12)
    assert lg.truncate_to(5)
    assert lg.log_end_offset == 5 and lg.size_in_bytes < size10 and lg.high_watermark == 5
    assert [o for o, _ in values_from(lg, 0)] == [0, 1, 2, 3, 4]
    assert lg.truncate_to(0)
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    with pytest.raises(ValueError):
        lg.truncate_to(-1)
    assert lg.append_as_leader(batch(b"again")).first_offset == 0


def test_truncate_across_segments_and_resizes_index(make_log: MakeLog) -> None:
    # #83/#84: later segments deleted, the new active segment's index has room again
    lg = five_per_segment(make_log, **{"retention.ms": "-1", "index.interval.bytes": "1"})
    lg.truncate_to(7)
    assert lg.segments.base_offsets() == [0, 5]
    seg = lg.active_segment
    assert seg.offset_index.max_entries == lg.config.segment_index_bytes // 8
    lg.update_high_watermark(7)
    assert [o for o, _ in values_from(lg, 0)] == list(range(7))
    assert not any(p.name.startswith("00000000000000000010") for p in lg.dir.iterdir())


def test_truncate_below_first_segment_starts_fully(make_log: MakeLog) -> None:
    lg = make_log(log_start_offset=10)
    lg.append_as_leader(batch(b"a"))
    assert lg.truncate_to(3)
    assert (lg.log_start_offset, lg.log_end_offset, lg.segments.base_offsets()) == (3, 3, [3])


def test_truncate_fully_and_start_at(make_log: MakeLog) -> None:
    # #85 testHighWatermarkMaintenance: truncateFullyAndStartAt(4)
    lg = make_log()
    for _ in range(3):
        lg.append_as_leader(batch(b"x", producer_id=1, producer_epoch=0,
                                  base_sequence=lg.log_end_offset))
    lg.take_producer_snapshot()
    lg.truncate_fully_and_start_at(4)
    assert (lg.log_end_offset, lg.log_start_offset, lg.high_watermark) == (4, 4, 4)
    assert lg.producer_state.is_empty and lg.producer_state.snapshot_offsets() == []
    assert sorted(p.name for p in lg.dir.iterdir() if p.suffix == ".log") == [
        "00000000000000000004.log"]


def test_producer_snapshots_after_truncation(make_log: MakeLog) -> None:
    # #86 testProducerIdMapTruncateTo
    lg = make_log()

    def append(seq: int) -> None:
        lg.append_as_leader(batch(b"v", producer_id=1, producer_epoch=0, base_sequence=seq))

    append(0)
    append(1)
    lg.take_producer_snapshot()
    append(2)
    lg.take_producer_snapshot()
    psm = lg.producer_state
    assert psm.snapshot_offsets() == [2, 3]
    lg.truncate_to(2)
    assert (psm.latest_snapshot_offset(), psm.map_end_offset) == (2, 2)
    lg.truncate_to(1)
    assert (psm.latest_snapshot_offset(), psm.map_end_offset) == (1, 1)
    lg.truncate_to(0)
    assert (psm.latest_snapshot_offset(), psm.map_end_offset) == (None, 0)


def test_truncation_rebuilds_dedup_state(make_log: MakeLog) -> None:
    lg = make_log()
    b0 = batch(b"a", producer_id=7, producer_epoch=0, base_sequence=0)
    b1 = batch(b"b", producer_id=7, producer_epoch=0, base_sequence=1)
    lg.append_as_leader(b0)
    lg.append_as_leader(b1)
    lg.truncate_to(1)
    again = lg.append_as_leader(b1)  # no longer a duplicate: it was truncated away
    assert not again.duplicate and again.first_offset == 1
    assert lg.append_as_leader(b0).duplicate
