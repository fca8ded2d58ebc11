"""Log: append, roll, flush, read, HW (behaviours #45-#67, #87 of the reference)."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_log_support import T0, batch, clock, make_log, read_batches, values_from  # noqa: F401

from tidelog.records import CompressionType, RecordBatch, build_batch
from tidelog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from tidelog.storage.log import FetchIsolation, Log
from tidelog.util.clock import ManualClock

MakeLog = Callable[..., Log]


def fill(lg: Log, n: int, size: int = 10, **kw: object) -> None:
    for i in range(n):
        lg.append_as_leader(batch(b"%0*d" % (size, i), **kw))  # type: ignore[arg-type]


def test_append_info_first_offset_and_epoch(make_log: MakeLog) -> None:
    # #49
    lg = make_log()
    a = lg.append_as_leader(batch(b"a", b"b"), leader_epoch=5)
    b = lg.append_as_leader(batch(b"c"), leader_epoch=5)
    assert (a.first_offset, a.last_offset, a.num_messages) == (0, 1, 2)
    assert (b.first_offset, b.last_offset, b.log_append_time) == (2, 2, -1)
    assert lg.log_end_offset == 3
    lg.update_high_watermark(3)
    assert [x.partition_leader_epoch for x in read_batches(lg, 0)] == [5, 5]


def test_log_append_time_reported(make_log: MakeLog, clock: ManualClock) -> None:
    lg = make_log({"message.timestamp.type": "LogAppendTime"})
    clock.advance(7)
    info = lg.append_as_leader(batch(b"a", ts=5))
    assert info.log_append_time == T0 + 7


def test_record_set_larger_than_segment_rejected(make_log: MakeLog) -> None:
    # #47 testMessageSetSizeCheck
    data = batch(b"x" * 100)
    lg = make_log({"segment.bytes": str(len(data) - 1)})
    with pytest.raises(RecordBatchTooLargeError) as ei:
        lg.append_as_leader(data)
    assert ei.value.kafka_error == "RECORD_LIST_TOO_LARGE"
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0


def test_message_size_check_leader_only(make_log: MakeLog) -> None:
    # #46: leaders check max.message.bytes, followers don't
    data = batch(b"x" * 100)
    lg = make_log({"max.message.bytes": "50"})
    with pytest.raises(RecordTooLargeError):
        lg.append_as_leader(data)
    lg.append_as_follower(data)
    assert lg.log_end_offset == 1


def test_corrupt_and_invalid_batches_append_nothing(make_log: MakeLog) -> None:
    # #45, #48
    lg = make_log()
    bad = bytearray(batch(b"abc"))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytes(bad))
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(batch(b"a", base_offset=3))
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0


def test_empty_append_is_noop(make_log: MakeLog, clock: ManualClock) -> None:
    # #50
    lg = make_log({"segment.ms": "10"})
    lg.append_as_leader(batch(b"a", ts=None))
    clock.advance(100)
    info = lg.append_as_leader(b"")
    assert info.num_messages == 0 and lg.log_end_offset == 1
    assert lg.number_of_segments() == 1


def test_follower_offsets_kept_and_checked(make_log: MakeLog) -> None:
    # #51, #52
    lg = make_log()
    lg.append_as_follower(batch(b"a", b"b", base_offset=0) + batch(b"c", base_offset=5))
    assert lg.log_end_offset == 6
    with pytest.raises(UnexpectedAppendOffsetError) as ei:
        lg.append_as_follower(batch(b"x", b"y", b"z", base_offset=4))
    assert (ei.value.first_offset, ei.value.last_offset) == (4, 6)
    data = b"".join(batch(b"v", base_offset=o) for o in (6, 7, 9, 8, 10))
    with pytest.raises(OffsetsOutOfOrderError):
        lg.append_as_follower(data)
    assert lg.log_end_offset == 6


def test_flush_on_message_count(make_log: MakeLog) -> None:
    # #54
    lg = make_log({"flush.messages": "3"})
    fill(lg, 2)
    assert lg.recovery_point == 0
    fill(lg, 1)
    assert lg.recovery_point == 3
    lg.flush()
    assert lg.recovery_point == 3
    fill(lg, 1)
    lg.flush(3)
    assert lg.recovery_point == 3
    lg.flush()
    assert lg.recovery_point == 4


def test_read_out_of_range(make_log: MakeLog) -> None:
    # #55 testReadOutOfRange: log starting at 1024 with one message
    lg = make_log(log_start_offset=1024)
    assert lg.log_end_offset == 1024
    lg.append_as_leader(batch(b"m"))
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.read(1025, 1000).records.size == 0
    for bad in (0, 1023, 1026):
        with pytest.raises(OffsetOutOfRangeError) as ei:
            lg.read(bad, 1000)
        assert ei.value.kafka_error == "OFFSET_OUT_OF_RANGE"
    assert [b.base_offset for b in read_batches(lg, 1024)] == [1024]


def test_read_bounded_by_isolation(make_log: MakeLog) -> None:
    # #56 fetch up to LEO / HW
    lg = make_log({"segment.bytes": "200"})
    fill(lg, 6)
    assert lg.number_of_segments() > 1
    assert read_batches(lg, 0) == []  # HW = 0
    lg.update_high_watermark(4)
    got = values_from(lg, 0)
    assert [o for o, _ in got] == [0, 1, 2, 3]
    for o in (4, 5, 6):
        assert lg.read(o, 10_000).records.size == 0
    assert [o for o, _ in values_from(lg, 0, isolation=FetchIsolation.LOG_END)] == list(range(6))


def test_compressed_reads_return_whole_batches(make_log: MakeLog) -> None:
    # #57
    lg = make_log()
    lg.append_as_leader(batch(b"0", b"1", codec=CompressionType.GZIP))
    lg.append_as_leader(batch(b"2", b"3", codec=CompressionType.GZIP))
    lg.update_high_watermark(4)
    assert read_batches(lg, 1)[0].base_offset == 0
    assert read_batches(lg, 3)[0].base_offset == 2


def test_reads_across_gaps_and_segments(make_log: MakeLog) -> None:
    # #58: follower batches 50-51 and 60-61 with a roll between
    lg = make_log(log_start_offset=50)
    lg.append_as_follower(batch(b"a", b"b", base_offset=50))
    lg.roll(55)
    lg.append_as_follower(batch(b"c", b"d", base_offset=60))
    lg.update_high_watermark(lg.log_end_offset)
    assert read_batches(lg, 53)[0].base_offset == 60
    assert read_batches(lg, 56)[0].base_offset == 60
    assert read_batches(lg, 61)[0].base_offset == 60


def test_min_one_message_and_small_max_length(make_log: MakeLog) -> None:
    # #31, #32
    lg = make_log()
    lg.append_as_leader(batch(b"x" * 100))
    lg.update_high_watermark(1)
    info = lg.read(0, 10, min_one_message=True)
    assert info.records.size > 100 and not info.first_entry_incomplete
    info = lg.read(0, 10, min_one_message=False)
    assert info.records.size == 10 and info.first_entry_incomplete
    assert lg.read(0, 0, min_one_message=False).records.size == 0


def test_size_based_roll_fills_exactly(make_log: MakeLog) -> None:
    # #60: a segment can be filled to exactly segment.bytes
    one = len(batch(b"0000000000"))
    lg = make_log({"segment.bytes": str(3 * one)})
    fill(lg, 3)
    assert lg.number_of_segments() == 1 and lg.active_segment.size == 3 * one
    fill(lg, 1)
    assert lg.number_of_segments() == 2 and lg.active_segment.base_offset == 3


def test_time_based_roll_without_timestamps(make_log: MakeLog, clock: ManualClock) -> None:
    # #61: no record timestamps -> wall clock since creation
    lg = make_log({"segment.ms": "1000"})
    lg.append_as_leader(batch(b"a", ts=None))
    clock.advance(1000)
    lg.append_as_leader(batch(b"b", ts=None))
    assert lg.number_of_segments() == 1
    clock.advance(1)
    lg.append_as_leader(batch(b"c", ts=None))
    assert lg.number_of_segments() == 2


def test_time_based_roll_uses_record_timestamps(make_log: MakeLog, clock: ManualClock) -> None:
    # #61: with timestamps the wall clock does not matter
    lg = make_log({"segment.ms": "1000"})
    lg.append_as_leader(batch(b"a", ts=T0))
    clock.advance(5000)
    lg.append_as_leader(batch(b"b", ts=T0 + 1000))
    assert lg.number_of_segments() == 1
    lg.append_as_leader(batch(b"c", ts=T0 + 1001))
    assert lg.number_of_segments() == 2


def test_empty_segment_never_rolls_on_time(make_log: MakeLog, clock: ManualClock) -> None:
    lg = make_log({"segment.ms": "10"})
    clock.advance(1000)
    lg.append_as_leader(batch(b"a", ts=None))
    assert lg.number_of_segments() == 1


def test_roll_jitter(make_log: MakeLog, clock: ManualClock) -> None:
    # #62: roll after segment.ms - jitter
    lg = make_log({"segment.ms": "1000", "segment.jitter.ms": "500"})
    lg.append_as_leader(batch(b"a", ts=None))
    jitter = lg.active_segment.roll_jitter_ms
    assert 0 <= jitter < 500
    clock.advance(1000 - jitter)
    lg.append_as_leader(batch(b"b", ts=None))
    assert lg.number_of_segments() == 1
    clock.advance(1)
    lg.append_as_leader(batch(b"c", ts=None))
    assert lg.number_of_segments() == 2


def test_compacted_topic_rolls_at_max_compaction_lag(make_log: MakeLog, clock: ManualClock) -> None:
    # #67
    lg = make_log({"cleanup.policy": "compact", "max.compaction.lag.ms": "100"})
    lg.append_as_leader(batch(b"a", ts=None))
    clock.advance(101)
    lg.append_as_leader(batch(b"b", ts=None))
    assert lg.number_of_segments() == 2


def test_index_full_roll(make_log: MakeLog) -> None:
    # #63: offset index of 2 entries with an entry per batch
    lg = make_log({"segment.index.bytes": "16", "index.interval.bytes": "1"})
    fill(lg, 6)
    assert lg.number_of_segments() >= 2
    lg.update_high_watermark(6)
    assert [o for o, _ in values_from(lg, 0)] == list(range(6))


def test_roll_on_relative_offset_overflow(make_log: MakeLog) -> None:
    # #63: lastOffset - base > 2^31 - 1 rolls
    lg = make_log()
    lg.append_as_follower(batch(b"a", base_offset=0))
    lg.append_as_follower(batch(b"b", base_offset=2**31 + 5))
    assert lg.segments.base_offsets() == [0, 2**31 + 5]


def test_roll_edge_cases_and_snapshots(make_log: MakeLog) -> None:
    # #65, #66: roll(1), roll(2), roll(3) -> snapshots 1..3; rolling onto an empty active
    # segment keeps one empty segment
    lg = make_log()
    for i in (1, 2, 3):
        lg.append_as_leader(batch(b"x"))
        lg.roll(i)
    psm = lg.producer_state
    assert (psm.oldest_snapshot_offset(), psm.latest_snapshot_offset()) == (1, 3)
    assert lg.recovery_point == 3  # the flush scheduled by the roll ran synchronously
    same = lg.roll(3)
    assert same.base_offset == 3 and same.size == 0 and lg.number_of_segments() == 4
    lg.append_as_leader(batch(b"y"))
    assert lg.roll(2).base_offset == 4  # the new base is max(expected, LEO)


def test_roll_trims_old_segment_indexes(make_log: MakeLog) -> None:
    # #64, 1.11: the rolled segment's index files shrink to their entries
    lg = make_log({"index.interval.bytes": "1"})
    fill(lg, 5)
    old = lg.active_segment
    lg.roll()
    assert old.offset_index.path.stat().st_size == 8 * old.offset_index.entries
    assert lg.active_segment.base_offset == 5


def test_high_watermark_maintenance(make_log: MakeLog) -> None:
    # #87
    lg = make_log()
    fill(lg, 3)
    assert lg.high_watermark == 0
    assert lg.update_high_watermark(5) == 3
    assert lg.update_high_watermark(-1) == 0
    assert lg.maybe_increment_high_watermark(2) == 0
    assert lg.maybe_increment_high_watermark(1) is None and lg.high_watermark == 2
    with pytest.raises(ValueError):
        lg.maybe_increment_high_watermark(4)
    fill(lg, 1)
    assert lg.high_watermark == 2  # appends don't move the HW


def test_flush_due_counts_unflushed_messages(make_log: MakeLog) -> None:
    """Kafka's check in UnifiedLog.append: ``flush.messages`` unflushed messages or more
    (asked by the broker's group commit, which defers the append's own fsync)."""
    lg = make_log({"flush.messages": "3"})

    def deferred(n: int) -> None:
        for i in range(n):
            lg.append_as_leader(batch(b"v%d" % i), defer_flush=True)

    deferred(2)
    assert not lg.flush_due()
    deferred(1)
    assert lg.flush_due() and lg.recovery_point == 0
    lg.flush()
    assert not lg.flush_due() and lg.recovery_point == 3
    deferred(4)
    assert lg.flush_due()


def test_high_watermark_at_the_end_keeps_its_position(make_log: MakeLog) -> None:
    """A HW moved to the log end takes the end's segment position (a fetch at the HW needs
    no index lookup); one below it has none."""
    lg = make_log()
    fill(lg, 3)
    assert lg.maybe_increment_high_watermark(3) == 0
    assert lg._hw_meta == lg.log_end_offset_metadata
    fill(lg, 2)
    assert lg.maybe_increment_high_watermark(4) == 3
    assert lg._hw_meta is None and lg.high_watermark == 4


def test_duplicate_appends_return_original_offsets(make_log: MakeLog) -> None:
    # #104 testDuplicateAppends
    lg = make_log()
    first = batch(b"a", b"b", producer_id=9, producer_epoch=0, base_sequence=0)
    lg.append_as_leader(first)
    lg.append_as_leader(batch(b"c", producer_id=9, producer_epoch=0, base_sequence=2))
    size = lg.size_in_bytes
    dup = lg.append_as_leader(first)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert lg.log_end_offset == 3 and lg.size_in_bytes == size
    from tidelog.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError

    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(b"d", producer_id=9, producer_epoch=0, base_sequence=5))
    lg.append_as_leader(batch(b"d", producer_id=9, producer_epoch=1, base_sequence=0))
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(batch(b"e", producer_id=9, producer_epoch=0, base_sequence=3))
    assert lg.log_end_offset == 4


def test_follower_accepts_duplicate_sequences(make_log: MakeLog) -> None:
    # #110 testDuplicateAppendToFollower
    lg = make_log()
    for o in (0, 1):
        lg.append_as_follower(batch(b"a", base_offset=o, producer_id=3, producer_epoch=0,
                                    base_sequence=0))
    assert lg.log_end_offset == 2


def test_fetch_offset_by_timestamp(make_log: MakeLog) -> None:
    # #68-#73
    lg = make_log({"segment.bytes": "300"})
    assert lg.fetch_offset_by_timestamp(0) is None
    for i, t in enumerate([T0, T0 + 1, T0]):
        lg.append_as_leader(batch(b"v%d" % i, ts=t), leader_epoch=i)
    fo = lg.fetch_offset_by_timestamp
    assert (fo(T0).offset, fo(T0).leader_epoch) == (0, 0)  # type: ignore[union-attr]
    assert (fo(T0 + 1).offset, fo(T0 + 1).leader_epoch) == (1, 1)  # type: ignore[union-attr]
    assert fo(T0 + 2) is None
    assert fo(-2) == type(fo(-2))(-1, 0, 0)  # earliest
    assert fo(-4).offset == 0  # type: ignore[union-attr]
    latest = fo(-1)
    assert latest is not None and (latest.offset, latest.leader_epoch) == (3, 2)
    mx = fo(-3)
    assert mx is not None and (mx.timestamp, mx.offset) == (T0 + 1, 1)
    tiered = fo(-5)
    assert tiered is not None and (tiered.timestamp, tiered.offset) == (-1, -1)


def test_closed_log_rejects_appends(make_log: MakeLog) -> None:
    lg = make_log()
    lg.close()
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(batch(b"a"))


def test_files_readable_by_kafka_python(make_log: MakeLog) -> None:
    """Cross-check: kafka-python's record reader over our .log files; struct-check indexes."""
    import struct

    from kafka.record import MemoryRecords

    lg = make_log({"segment.bytes": "2000", "index.interval.bytes": "100"})
    expected = []
    for i in range(40):
        codec = [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4][i % 3]
        vals = [b"value-%d-%d" % (i, j) for j in range(3)]
        lg.append_as_leader(build_batch([(T0 + i, b"key%d" % i, v) for v in vals], codec))
        expected += vals
    lg.close()
    got = []
    for p in sorted(lg.dir.glob("*.log")):
        base = int(p.name[:20])
        mr = MemoryRecords(p.read_bytes())
        offsets = []
        while mr.has_next():
            b = mr.next_batch()
            for r in b:
                offsets.append(r.offset)
                got.append(r.value)
        assert offsets[0] == base
        data = p.read_bytes()
        idx = p.with_suffix(".index").read_bytes()
        for k in range(0, len(idx), 8):
            rel, pos = struct.unpack_from(">ii", idx, k)
            assert RecordBatch(memoryview(data)[pos:pos + 61]).last_offset == base + rel
        tix = p.with_suffix(".timeindex").read_bytes()
        ts_prev = -1
        for k in range(0, len(tix), 12):
            ts, rel = struct.unpack_from(">qi", tix, k)
            assert ts >= ts_prev and rel >= 0
            ts_prev = ts
    assert got == expected


@pytest.mark.parametrize("move", ["update_high_watermark", "maybe_increment_high_watermark"])
def test_transactions_last_stable_offset_and_aborted_index(make_log: MakeLog, move: str
                                                           ) -> None:
    """Also through the leader's HW move (``maybe_increment_high_watermark``): a completed
    transaction leaves the LSO's way once the HW passes its marker."""
    # #88 testFetchUpToLastStableOffset, #89 txn index entries, #59 aborted list on read
    from tidelog.records import RecordBatchBuilder
    from tidelog.records.batch import ControlRecordType
    from tidelog.storage.validator import AppendOrigin

    lg = make_log()

    def hw_to_end() -> None:
        getattr(lg, move)(lg.log_end_offset)

    def txn_data(pid: int, n: int, seq: int) -> None:
        lg.append_as_leader(batch(*[b"t"] * n, producer_id=pid, producer_epoch=0,
                                  base_sequence=seq, is_transactional=True))

    def marker(pid: int, kind: ControlRecordType) -> None:
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True,
                               is_control=True)
        b.append_control(kind, T0, coordinator_epoch=0)
        lg.append_as_leader(b.build(), origin=AppendOrigin.COORDINATOR)

    txn_data(1, 5, 0)  # 0-4
    lg.append_as_leader(batch(b"p", b"p", b"p"))  # 5-7
    txn_data(2, 2, 0)  # 8-9
    hw_to_end()
    assert lg.last_stable_offset == 0
    marker(1, ControlRecordType.COMMIT)  # 10
    hw_to_end()
    assert lg.last_stable_offset == 8
    committed = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    from tidelog.records import iter_batches

    assert [b.last_offset for b in iter_batches(committed.records.read())] == [4, 7]
    marker(2, ControlRecordType.ABORT)  # 11
    assert lg.last_stable_offset == 8  # the abort is above the HW
    hw_to_end()
    assert lg.last_stable_offset == 12
    info = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions or []] == [(2, 8)]
    entries = lg.active_segment.txn_index.all_aborted_txns()
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in entries] == [(2, 8, 11, 12)]


def test_io_error_is_a_storage_error_and_loses_nothing(
        make_log: MakeLog, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    import tidelog.storage.file_records as fr
    from tidelog.storage import log as log_module
    from tidelog.storage import log_plain

    lg = make_log()
    lg.append_as_leader(batch(b"a"))
    real_pwrite = fr.os.pwrite

    def full_disk(fd: int, data: object, pos: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def plain_full_disk(*args: object) -> None:  # (the native plain append's own pwrite)
        raise OSError(errno.ENOSPC, "No space left on device")

    real_plain = log_plain._append
    monkeypatch.setattr(fr.os, "pwrite", full_disk)
    # (the twin's write fails: the native core's own failed write is
    # test_log_plain.py's test_a_failed_plain_write_is_the_storage_error_of_a_failed_write)
    monkeypatch.setattr(log_module, "append_plain", log_plain.append_plain_leader_py)
    monkeypatch.setattr(log_plain, "_append", plain_full_disk)
    with pytest.raises(KafkaStorageError) as ei:
        lg.append_as_leader(batch(b"b"))
    assert ei.value.kafka_error == "KAFKA_STORAGE_ERROR" and str(lg.dir) in str(ei.value)
    assert "No space left on device" in str(ei.value)
    assert lg.log_end_offset == 1 and lg.active_segment.size == len(batch(b"a"))
    monkeypatch.setattr(fr.os, "pwrite", real_pwrite)
    monkeypatch.setattr(log_plain, "_append", real_plain)
    assert lg.append_as_leader(batch(b"c")).first_offset == 1
    lg.update_high_watermark(2)
    assert values_from(lg, 0) == [(0, b"a"), (1, b"c")]


def test_producer_expiration(make_log: MakeLog, clock: ManualClock) -> None:
    # #111 testPeriodicProducerIdExpiration: expiration 200 -> present at +100, gone at +200;
    # an expired producer may then start again at any sequence (#107)
    lg = make_log(producer_id_expiration_ms=200)
    lg.append_as_leader(batch(b"a", ts=clock.milliseconds(), producer_id=5, producer_epoch=0,
                              base_sequence=0))
    clock.advance(100)
    assert lg.remove_expired_producers(clock.milliseconds()) == []
    assert lg.producer_state.last_entry(5) is not None
    clock.advance(100)
    assert lg.remove_expired_producers(clock.milliseconds()) == [5]
    assert lg.producer_state.last_entry(5) is None
    info = lg.append_as_leader(batch(b"b", producer_id=5, producer_epoch=0, base_sequence=9))
    assert info.first_offset == 1


def test_concurrent_reader_sees_only_whole_committed_batches(make_log: MakeLog) -> None:
    """A reader racing the appender (rolls included) never sees bytes past the HW."""
    import threading

    from tidelog.records import iter_batches

    lg = make_log({"segment.bytes": "4000", "index.interval.bytes": "200"})
    n = 600
    errors: list[str] = []
    done = threading.Event()
    reached: list[int] = []

    def reader() -> None:
        pos = 0
        while pos < n and not errors:
            hw = lg.high_watermark
            data = lg.read(pos, 3000).records.read()
            for b in iter_batches(data):  # validates every CRC
                if b.base_offset != pos or b.last_offset >= max(hw, lg.high_watermark):
                    errors.append(f"batch {b.base_offset} at expected {pos}, hw {hw}")
                pos = b.next_offset
            if done.is_set() and pos >= lg.high_watermark:
                break
        reached.append(pos)

    t = threading.Thread(target=reader)
    t.start()
    for i in range(n):
        lg.append_as_leader(batch(b"%05d" % i, codec=CompressionType.LZ4 if i % 2 else
                                  CompressionType.NONE))
        lg.maybe_increment_high_watermark(lg.log_end_offset)
    done.set()
    t.join(timeout=60)
    assert not t.is_alive()
    assert errors == []
    assert reached == [n]
    assert lg.number_of_segments() > 5


def test_follower_append_spanning_more_than_int32_offsets(make_log: MakeLog) -> None:
    # #63/#33: batches whose offsets cannot share one segment land in separate segments
    lg = make_log()
    data = batch(b"a", base_offset=0) + batch(b"b", base_offset=2**31 + 7)
    info = lg.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 2**31 + 7)
    assert lg.segments.base_offsets() == [0, 2**31 + 7]
    assert lg.log_end_offset == 2**31 + 8


def test_aborted_transactions_listed_by_segment_after_a_roll_a_reopen_and_a_truncation(
        make_log: MakeLog) -> None:
    """A read_committed read lists the aborted transactions of the segments it reads from:
    none from a segment whose index has no entry (answered without reading the index), the
    abort from its segment after a restart (the index loaded from its file), none once a
    truncation took the abort away."""
    from tidelog.records import RecordBatchBuilder
    from tidelog.records.batch import ControlRecordType
    from tidelog.storage.validator import AppendOrigin

    lg = make_log()
    lg.append_as_leader(batch(b"p", b"p"))  # 0-1
    lg.append_as_leader(batch(b"t", b"t", producer_id=7, producer_epoch=0, base_sequence=0,
                              is_transactional=True))  # 2-3
    m = RecordBatchBuilder(producer_id=7, producer_epoch=0, is_transactional=True,
                           is_control=True)
    m.append_control(ControlRecordType.ABORT, T0, coordinator_epoch=0)
    lg.append_as_leader(m.build(), origin=AppendOrigin.COORDINATOR)  # 4
    first = lg.active_segment
    lg.roll()
    lg.append_as_leader(batch(b"q", b"q"))  # 5-6 in a segment with no aborted transaction
    lg.update_high_watermark(lg.log_end_offset)

    def aborted(start: int, log: Log) -> list[tuple[int, int]]:
        info = log.read(start, 1 << 20, FetchIsolation.TXN_COMMITTED)
        return [(t.producer_id, t.first_offset) for t in info.aborted_transactions or []]

    assert not first.txn_index.is_empty and lg.active_segment.txn_index.is_empty
    assert aborted(0, lg) == [(7, 2)] and aborted(3, lg) == [(7, 2)]
    assert aborted(5, lg) == []
    path = lg.dir
    lg.close()
    again = make_log(name=path.name)
    again.update_high_watermark(again.log_end_offset)  # (a restart reads its checkpoint)
    assert aborted(2, again) == [(7, 2)] and aborted(6, again) == []
    again.truncate_to(2)  # the transaction and its abort go
    assert again.active_segment.txn_index.is_empty
    again.append_as_leader(batch(b"r"))  # 2
    again.update_high_watermark(again.log_end_offset)
    assert aborted(0, again) == []
