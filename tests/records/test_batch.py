"""RecordBatch v2 view: header fields, CRC, patching, records, control records."""

from __future__ import annotations

import struct

import pytest

from tidelog.records import (
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_batch,
    crc32c,
    iter_batches,
    parse_end_txn_marker,
)

WORKED_EXAMPLE_HEX = (
    "00000000000000000000003a" "00000000" "02" "716a6189" "0000" "00000000"
    "00000000000003e8" "00000000000003e8" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "10000000026b027600"
)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_worked_example_is_70_bytes_with_known_crc() -> None:
    data = build_batch([(1000, b"k", b"v")], partition_leader_epoch=0)
    assert len(data) == 70
    assert RecordBatch(data).crc == 0x716A6189
    assert data.hex() == WORKED_EXAMPLE_HEX


def test_header_fields() -> None:
    b = RecordBatchBuilder(
        CompressionType.GZIP,
        base_offset=100,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    for i in range(4):
        b.append(2000 + i * 10, f"k{i}".encode(), b"v")
    batch = RecordBatch(b.build())
    assert batch.base_offset == 100
    assert batch.last_offset == 103
    assert batch.last_offset_delta == 3
    assert batch.records_count == 4
    assert batch.partition_leader_epoch == 5
    assert batch.magic == 2
    assert batch.compression is CompressionType.GZIP
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert batch.is_transactional and not batch.is_control
    assert batch.base_timestamp == 2000 and batch.max_timestamp == 2030
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.last_sequence == 14
    assert batch.batch_length == batch.size_in_bytes - 12
    assert batch.is_valid()


def test_last_sequence_wraps_past_int_max() -> None:
    data = build_batch([(0, None, b"a"), (0, None, b"b")], producer_id=1, producer_epoch=0,
                       base_sequence=2**31 - 1)
    assert RecordBatch(data).last_sequence == 0


def test_patching_base_offset_and_epoch_keeps_crc() -> None:
    buf = bytearray(build_batch([(5, b"a", b"b")]))
    batch = RecordBatch(buf)
    crc = batch.crc
    batch.set_base_offset(1234)
    batch.set_partition_leader_epoch(9)
    assert batch.crc == crc and batch.is_valid()
    assert batch.base_offset == 1234 and batch.partition_leader_epoch == 9
    assert [r.offset for r in batch] == [1234]


def test_log_append_time_recomputes_crc_and_overrides_record_timestamps() -> None:
    buf = bytearray(build_batch([(5, b"a", b"b"), (7, b"c", b"d")]))
    batch = RecordBatch(buf)
    old = batch.crc
    batch.set_log_append_time(99_999)
    assert batch.crc != old and batch.is_valid()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch] == [99_999, 99_999]


def test_bit_flip_detected_with_position() -> None:
    one = build_batch([(1, b"k", b"v")])
    buf = bytearray(one + one)
    buf[len(one) + 65] ^= 0x01
    it = iter_batches(buf, path="x.log")
    assert next(it).position == 0
    with pytest.raises(CorruptRecordError) as e:
        next(it)
    assert e.value.position == len(one)
    assert "x.log" in str(e.value) and f"byte {len(one)}" in str(e.value)


def test_partial_trailing_batch_is_invisible() -> None:
    one = build_batch([(1, b"k", b"v")])
    for cut in range(1, len(one)):
        got = list(iter_batches(one + one[:cut]))
        assert len(got) == 1


def test_length_below_minimum_is_corrupt() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v")])) + bytes(40)  # zeros: length 0
    with pytest.raises(CorruptRecordError) as e:
        list(iter_batches(buf))
    assert e.value.position == 70


def test_bad_magic_is_corrupt() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v")]))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_batches(buf))


def test_null_key_tombstone_and_headers() -> None:
    data = build_batch([(1, None, None)])
    rec = next(iter(RecordBatch(data)))
    assert rec.key is None and rec.value is None
    b = RecordBatchBuilder()
    b.append(3, b"k", b"v", [("h1", b"x"), ("h2", None)])
    rec = next(iter(RecordBatch(b.build())))
    assert rec.headers == [("h1", b"x"), ("h2", None)]


def test_explicit_offsets_keep_gaps() -> None:
    b = RecordBatchBuilder(base_offset=10)
    b.append(1, b"a", b"1", offset=10)
    b.append(1, b"b", b"2", offset=14)
    batch = RecordBatch(b.build())
    assert [r.offset for r in batch] == [10, 14]
    assert batch.last_offset == 14 and batch.records_count == 2


def test_control_record_markers() -> None:
    b = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=4, producer_epoch=1)
    b.append_control(ControlRecordType.COMMIT, 10, coordinator_epoch=6)
    batch = RecordBatch(b.build())
    assert batch.is_control and batch.control_type() is ControlRecordType.COMMIT
    marker = parse_end_txn_marker(next(iter(batch)))
    assert marker.coordinator_epoch == 6


def test_record_count_mismatch_is_invalid() -> None:
    buf = bytearray(build_batch([(1, b"k", b"v"), (2, b"k", b"v")]))
    struct.pack_into(">i", buf, 57, 3)
    with pytest.raises(InvalidRecordError):
        list(RecordBatch(buf))
    struct.pack_into(">i", buf, 57, 1)
    with pytest.raises(InvalidRecordError, match="left after"):
        list(RecordBatch(buf))
