"""The pure batch-filtering core (Kafka's MemoryRecords.filterTo as the cleaner uses it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kafka.record.default_records as kp
import pytest

from tidelog.records import (
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    iter_batches,
)
from tidelog.storage.cleaner.batch_filter import (
    BatchRetention,
    BatchRetentionResult,
    ScannedRecord,
    filter_to,
    scan_records,
)

NOW = 1_700_000_000_000
CODECS = list(CompressionType)


@dataclass
class PredicateFilter:
    keep: Callable[[ScannedRecord], bool]
    retention: BatchRetention = BatchRetention.DELETE_EMPTY
    current_time: int = NOW
    delete_retention_ms: int = 1000
    empty_txn_marker: bool = False

    def check_batch_retention(self, batch: RecordBatch) -> BatchRetentionResult:
        return BatchRetentionResult(self.retention, self.empty_txn_marker)

    def should_retain_record(self, batch: RecordBatch, record: ScannedRecord) -> bool:
        return self.keep(record)


def _batch(codec: CompressionType = CompressionType.NONE, n: int = 6, **kw: object) -> bytes:
    b = RecordBatchBuilder(codec, base_offset=100, producer_id=7, producer_epoch=3,
                           base_sequence=40, partition_leader_epoch=5, **kw)  # type: ignore[arg-type]
    for i in range(n):
        value = None if i == 3 else f"value-{i}".encode() * (i + 1)
        headers = [("h", f"{i}".encode())] if i % 2 else []
        b.append(NOW - 5000 + i * 10, f"k{i}".encode(), value, headers)
    return b.build()


def _decoded(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for batch in iter_batches(data) for r in batch]


def test_scan_records_locates_keys_and_tombstones() -> None:
    payload, recs = scan_records(RecordBatch(_batch(CompressionType.GZIP)))
    assert [r.offset for r in recs] == list(range(100, 106))
    assert [r.key for r in recs] == [f"k{i}".encode() for i in range(6)]
    assert [r.has_value for r in recs] == [True, True, True, False, True, True]
    assert [r.timestamp for r in recs] == [NOW - 5000 + i * 10 for i in range(6)]
    assert recs[-1].end == len(payload)


@pytest.mark.parametrize("codec", CODECS)
def test_all_kept_without_tombstones_copies_the_batch(codec: CompressionType) -> None:
    src = _batch(codec, n=3)
    res = filter_to([RecordBatch(src)], PredicateFilter(lambda r: True))
    assert bytes(res.output) == src
    assert (res.messages_read, res.messages_retained) == (3, 3)
    assert res.bytes_read == res.bytes_retained == len(src)


@pytest.mark.parametrize("codec", CODECS)
def test_dropping_records_keeps_batch_fields_offsets_and_record_bytes(codec: CompressionType) -> None:
    src = _batch(codec)
    original = _decoded(src)
    keep = {101, 102, 104}  # no tombstone kept, the first record goes
    res = filter_to([RecordBatch(src)], PredicateFilter(lambda r: r.offset in keep))
    (out,) = list(iter_batches(bytes(res.output)))
    assert out.is_valid()
    old = RecordBatch(src)
    assert (out.base_offset, out.last_offset_delta, out.producer_id, out.producer_epoch,
            out.base_sequence, out.partition_leader_epoch, out.compression) == (
        old.base_offset, old.last_offset_delta, old.producer_id, old.producer_epoch,
        old.base_sequence, old.partition_leader_epoch, codec)
    assert out.records_count == 3
    assert not out.has_delete_horizon
    assert out.base_timestamp == NOW - 5000 + 10  # the first kept record's timestamp
    assert out.max_timestamp == NOW - 5000 + 40
    assert _decoded(bytes(res.output)) == [r for r in original if r[0] in keep]
    assert res.max_offset == 104
    assert res.shallow_offset_of_max_timestamp == 105
    # An independent decoder agrees.
    kb = kp.DefaultRecordBatch(bytearray(res.output))
    assert kb.validate_crc()
    assert [(r.offset, r.key, r.value) for r in kb] == [(o, k, v) for o, _t, k, v, _h in
                                                        original if o in keep]


@pytest.mark.parametrize("codec", CODECS)
def test_first_pass_keeping_a_tombstone_sets_the_delete_horizon(codec: CompressionType) -> None:
    src = _batch(codec)
    original = _decoded(src)
    flt = PredicateFilter(lambda r: True, delete_retention_ms=86_400_000)
    res = filter_to([RecordBatch(src)], flt)
    (out,) = list(iter_batches(bytes(res.output)))
    assert out.is_valid()
    assert out.has_delete_horizon
    assert out.delete_horizon_ms == NOW + 86_400_000
    assert out.base_timestamp == NOW + 86_400_000
    assert out.max_timestamp == RecordBatch(src).max_timestamp
    assert _decoded(bytes(res.output)) == original  # timestamps survive the new base

    # A second pass that keeps the tombstone keeps the existing horizon (bytes unchanged).
    later = PredicateFilter(lambda r: True, current_time=NOW + 5000)
    again = filter_to([out], later)
    assert bytes(again.output) == bytes(out.buf)
    # Dropping a record from a batch with a horizon keeps the horizon.
    third = filter_to([out], PredicateFilter(lambda r: r.offset != 100, current_time=NOW + 9))
    (out3,) = list(iter_batches(bytes(third.output)))
    assert out3.delete_horizon_ms == NOW + 86_400_000
    assert _decoded(bytes(third.output)) == original[1:]


def test_empty_batch_dropped_or_kept_as_header() -> None:
    src = _batch(CompressionType.LZ4)
    dropped = filter_to([RecordBatch(src)], PredicateFilter(lambda r: False))
    assert dropped.output == bytearray()
    assert dropped.messages_read == 6
    assert dropped.bytes_read == len(src)
    kept = filter_to([RecordBatch(src)],
                     PredicateFilter(lambda r: False, BatchRetention.RETAIN_EMPTY))
    assert len(kept.output) == RECORD_BATCH_OVERHEAD
    (hdr,) = list(iter_batches(bytes(kept.output)))
    old = RecordBatch(src)
    assert hdr.is_valid()
    assert hdr.records_count == 0
    assert hdr.base_timestamp == -1
    assert hdr.compression is CompressionType.NONE
    assert (hdr.base_offset, hdr.last_offset, hdr.last_sequence, hdr.producer_id,
            hdr.max_timestamp) == (old.base_offset, old.last_offset, old.last_sequence,
                                   old.producer_id, old.max_timestamp)
    assert list(hdr.iter_records()) == []


def test_delete_retention_skips_the_records() -> None:
    seen: list[int] = []

    def keep(r: ScannedRecord) -> bool:
        seen.append(r.offset)
        return True

    res = filter_to([RecordBatch(_batch())], PredicateFilter(keep, BatchRetention.DELETE))
    assert res.output == bytearray()
    assert seen == []
    assert res.messages_retained == 0


def test_log_append_time_batch_keeps_its_max_timestamp() -> None:
    src = _batch(CompressionType.ZSTD, timestamp_type=TimestampType.LOG_APPEND_TIME,
                 log_append_time=NOW + 77)
    res = filter_to([RecordBatch(src)], PredicateFilter(lambda r: r.offset in (102, 105)))
    (out,) = list(iter_batches(bytes(res.output)))
    assert out.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert out.max_timestamp == NOW + 77
    assert [r.timestamp for r in out] == [NOW + 77, NOW + 77]
    assert [r.offset for r in out] == [102, 105]


def test_multiple_batches_metadata() -> None:
    a = _batch(CompressionType.SNAPPY)
    b = RecordBatchBuilder(base_offset=200)
    b.append(NOW + 10_000, b"x", b"1")
    b.append(NOW + 1, b"y", b"2")
    src = a + b.build()
    res = filter_to(iter_batches(src), PredicateFilter(lambda r: r.offset != 105))
    assert [r[0] for r in _decoded(bytes(res.output))] == [100, 101, 102, 103, 104, 200, 201]
    assert res.max_offset == 201
    assert res.max_timestamp == NOW + 10_000
    assert res.shallow_offset_of_max_timestamp == 201
    assert res.messages_read == 8
    assert res.messages_retained == 7


def test_scan_records_rejects_malformed_records() -> None:
    from tidelog.records import InvalidRecordError, assemble_batch
    from tidelog.records.builder import encode_record

    def batch_with(payload: bytes, count: int) -> RecordBatch:
        return RecordBatch(assemble_batch(
            base_offset=0, partition_leader_epoch=0, attributes=0, last_offset_delta=count - 1,
            base_timestamp=NOW, max_timestamp=NOW, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, records_count=count, payload=payload))

    good = bytearray()
    encode_record(good, 0, 0, b"k" * 70, b"v" * 300)  # two-byte length and key length
    _payload, (rec,) = scan_records(batch_with(bytes(good), 1))
    assert (rec.key, rec.has_value, rec.end) == (b"k" * 70, True, len(good))
    with pytest.raises(InvalidRecordError):
        scan_records(batch_with(bytes(good[:-5]), 1))  # truncated
    with pytest.raises(InvalidRecordError):
        scan_records(batch_with(bytes(good) + b"\x00", 1))  # trailing garbage
    with pytest.raises(InvalidRecordError):
        scan_records(batch_with(bytes(good), 2))  # fewer records than declared
