"""LogValidator behaviours #45-#50, #118-#125 (reference kafka-log-layer.md §3 F, O)."""

from __future__ import annotations

import struct

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder, build_batch
from tidelog.records.builder import assemble_batch, encode_record
from tidelog.records.compression import compress
from tidelog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
)
from tidelog.storage.validator import (
    AppendOrigin,
    analyze_follower_records,
    validate_and_assign_offsets,
)

NOW = 1_700_000_000_000
CFG = LogConfig()


def recs(n: int, ts: int = NOW, key: bytes | None = b"k") -> list[tuple[int, bytes | None, bytes]]:
    return [(ts, key, b"v%d" % i) for i in range(n)]


def validate(data: bytes, cfg: LogConfig = CFG, **kw: object):  # type: ignore[no-untyped-def]
    kw.setdefault("now_ms", NOW)
    kw.setdefault("offset", 0)
    return validate_and_assign_offsets(data, cfg, **kw)  # type: ignore[arg-type]


def patch(data: bytes, pos: int, fmt: str, value: int, recrc: bool = True) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, pos, value)
    if recrc:
        b = RecordBatch(buf)
        b._update_crc()
    return bytes(buf)


def test_in_place_offset_assignment_and_epoch() -> None:
    # #124 testRelativeOffsetAssignmentNonCompressedV2, #49
    data = build_batch(recs(3))
    r = validate(data, offset=100, leader_epoch=7)
    assert (r.first_offset, r.last_offset, r.num_messages) == (100, 102, 3)
    assert r.batch.base_offset == 100 and r.batch.partition_leader_epoch == 7
    assert not r.recompressed
    assert r.log_append_time == -1
    assert r.batch.is_valid()
    # only the 12 bytes outside the CRC changed: offset and leader epoch
    assert bytes(r.records[21:]) == data[21:] and bytes(r.records[8:12]) == data[8:12]
    assert [x.offset for x in r.batch.iter_records()] == [100, 101, 102]


def test_log_append_time() -> None:
    # #123 checkLogAppendTimeNonCompressed
    cfg = LogConfig.from_props({"message.timestamp.type": "LogAppendTime"})
    r = validate(build_batch(recs(3, ts=5)), cfg, now_ms=NOW + 9)
    assert r.log_append_time == NOW + 9 and r.max_timestamp == NOW + 9
    assert r.offset_of_max_timestamp == 2
    assert r.batch.is_valid()
    assert [x.timestamp for x in r.batch.iter_records()] == [NOW + 9] * 3


def test_create_time_max_timestamp_corrected_from_records() -> None:
    data = build_batch([(NOW - 5, b"a", b"1"), (NOW - 1, b"b", b"2"), (NOW - 3, b"c", b"3")])
    data = patch(data, 35, ">q", 12)  # a producer lying about maxTimestamp
    r = validate(data)
    assert r.max_timestamp == NOW - 1 and r.batch.is_valid()


def test_base_offset_must_be_zero_from_clients() -> None:
    # #45
    data = build_batch(recs(1), base_offset=5)
    with pytest.raises(InvalidRecordError, match="should be 0"):
        validate(data)
    assert validate(data, origin=AppendOrigin.COORDINATOR).first_offset == 0


def test_size_limit() -> None:
    # #46
    data = build_batch(recs(1))
    cfg = LogConfig.from_props({"max.message.bytes": str(len(data) - 1)})
    with pytest.raises(RecordTooLargeError) as ei:
        validate(data, cfg)
    assert ei.value.kafka_error == "MESSAGE_TOO_LARGE"
    validate(data, LogConfig.from_props({"max.message.bytes": str(len(data))}))


def test_crc_mismatch() -> None:
    # #48
    data = patch(build_batch(recs(2)), 70, ">b", 0x55, recrc=False)
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate(data)


@pytest.mark.parametrize(("delta", "count"), [(0, 3), (15, 3), (-3, 3)])
def test_inconsistent_count_and_offset(delta: int, count: int) -> None:
    # #119 testInconsistentCountAndOffset
    data = patch(patch(build_batch(recs(3)), 23, ">i", delta), 57, ">i", count)
    with pytest.raises(InvalidRecordError):
        validate(data)


@pytest.mark.parametrize(("declared", "real"), [(5, 6), (1, 2), (6, 5)])
def test_unmatched_number_of_records(declared: int, real: int) -> None:
    # #119 testUnmatchedNumberOfRecords
    data = patch(patch(build_batch(recs(real)), 57, ">i", declared), 23, ">i", declared - 1)
    with pytest.raises(InvalidRecordError):
        validate(data)


def test_empty_batch_not_allowed() -> None:
    data = assemble_batch(base_offset=0, partition_leader_epoch=-1, attributes=0,
                          last_offset_delta=-1, base_timestamp=-1, max_timestamp=-1,
                          producer_id=-1, producer_epoch=-1, base_sequence=-1,
                          records_count=0, payload=b"")
    with pytest.raises(InvalidRecordError, match="offset range"):
        validate(data)


def test_control_batches_rejected_from_clients() -> None:
    # #120
    b = RecordBatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True,
                           is_control=True)
    b.append_control(1, NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="control"):
        validate(b.build())
    assert validate(b.build(), origin=AppendOrigin.COORDINATOR).num_messages == 1


def test_producer_id_without_sequence_rejected() -> None:
    # #120 checkInvalidSequence: baseSequence -2 at byte 53
    data = patch(build_batch(recs(1), producer_id=5, producer_epoch=0, base_sequence=0),
                 53, ">i", -2)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate(data)


def test_compacted_topic_requires_keys() -> None:
    # #121 testCompactedTopicConstraints: [keyed, unkeyed] gzip -> index 1
    cfg = LogConfig.from_props({"cleanup.policy": "compact"})
    data = build_batch([(NOW, b"k", b"v"), (NOW, None, b"v")], CompressionType.GZIP)
    with pytest.raises(RecordValidationError) as ei:
        validate(data, cfg)
    assert [i for i, _ in ei.value.errors] == [1]
    assert isinstance(ei.value.cause, InvalidRecordError)
    # Kafka's LogValidator text: the record error names the partition, the cause lists them
    assert ei.value.errors[0][1].startswith("Compacted topic cannot accept message without key "
                                            "in topic partition ")
    assert str(ei.value.cause).startswith(
        "One or more records have been rejected due to 1 record errors in total, and only "
        "showing the first three errors at most: [RecordError(batchIndex=1, message='Compacted "
        "topic cannot accept message without key in topic partition ")
    assert ei.value.kafka_error == "INVALID_RECORD"
    validate(build_batch(recs(2)), cfg)


@pytest.mark.parametrize("sign", [-1, 1])
def test_create_time_bounds(sign: int) -> None:
    # #122: every offending record listed; -1 never checked
    cfg = LogConfig.from_props({"message.timestamp.before.max.ms": "1000",
                                "message.timestamp.after.max.ms": "1000"})
    bad = build_batch(recs(3, ts=NOW + sign * 1001))
    with pytest.raises(RecordValidationError) as ei:
        validate(bad, cfg)
    assert [i for i, _ in ei.value.errors] == [0, 1, 2]
    assert isinstance(ei.value.cause, InvalidTimestampError)
    assert ei.value.kafka_error == "INVALID_TIMESTAMP"
    validate(build_batch(recs(3, ts=NOW + sign * 1000)), cfg)
    validate(build_batch(recs(3, ts=-1)), cfg)


def test_log_append_time_batch_from_client_rejected_on_lat_topic() -> None:
    cfg = LogConfig.from_props({"message.timestamp.type": "LogAppendTime"})
    from tidelog.records import TimestampType

    data = build_batch(recs(1), timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=3)
    with pytest.raises(RecordValidationError) as ei:
        validate(data, cfg)
    assert ei.value.kafka_error == "INVALID_TIMESTAMP"


def test_one_batch_per_request() -> None:
    # #118
    with pytest.raises(InvalidRecordError, match="exactly one"):
        validate(build_batch(recs(1)) + build_batch(recs(1)))


def test_truncated_records_are_invalid() -> None:
    # Kafka 3.x: a malformed record set is INVALID_RECORD (CORRUPT_MESSAGE is for CRCs)
    data = build_batch(recs(2))
    with pytest.raises(InvalidRecordError, match="byte 0"):
        validate(data[:-3])


@pytest.mark.parametrize("codec", list(CompressionType))
def test_recompression_when_topic_codec_differs(codec: CompressionType) -> None:
    # #125 testDifferentCodecCausesRecompression
    cfg = LogConfig.from_props({"compression.type": "zstd"})
    data = build_batch(recs(5), codec, producer_id=3, producer_epoch=1, base_sequence=10)
    r = validate(data, cfg, offset=40, leader_epoch=2)
    assert r.batch.compression is CompressionType.ZSTD
    assert r.recompressed == (codec is not CompressionType.ZSTD)
    assert (r.batch.producer_id, r.batch.producer_epoch, r.batch.base_sequence) == (3, 1, 10)
    assert r.batch.partition_leader_epoch == 2 and r.batch.is_valid()
    assert [(x.offset, x.value) for x in r.batch.iter_records()] == [
        (40 + i, b"v%d" % i) for i in range(5)]


def test_different_level_does_not_recompress() -> None:
    cfg = LogConfig.from_props({"compression.type": "gzip", "compression.gzip.level": "9"})
    data = build_batch(recs(4), CompressionType.GZIP, compression_level=1)
    r = validate(data, cfg)
    assert not r.recompressed and bytes(r.records[21:]) == data[21:]


def test_recompressed_size_rechecked() -> None:
    # incompressible payload grows slightly when gzip'd
    import os

    data = build_batch([(NOW, b"k", os.urandom(2000))])
    cfg = LogConfig.from_props({"compression.type": "gzip",
                                "max.message.bytes": str(len(data))})
    with pytest.raises(RecordTooLargeError, match="recompression"):
        validate(data, cfg)


def test_compressed_non_sequential_inner_offsets_rebuilt() -> None:
    # #124: consistent count but deltas 0, 2, 2 -> rebuilt with 0, 1, 2
    body = bytearray()
    for i, d in enumerate([0, 2, 2]):
        encode_record(body, d, 0, b"k", b"%d" % i)
    payload = compress(CompressionType.LZ4, bytes(body))
    data = assemble_batch(base_offset=0, partition_leader_epoch=-1,
                          attributes=int(CompressionType.LZ4), last_offset_delta=2,
                          base_timestamp=NOW, max_timestamp=NOW, producer_id=-1,
                          producer_epoch=-1, base_sequence=-1, records_count=3,
                          payload=payload)
    r = validate(data, offset=10)
    assert r.recompressed
    assert [x.offset for x in r.batch.iter_records()] == [10, 11, 12]


def test_follower_analysis_requires_increasing_offsets() -> None:
    # #51: batches at 0, 1, 3, 2, 4 -> OffsetsOutOfOrder
    data = b"".join(build_batch(recs(1), base_offset=o) for o in (0, 1, 3, 2, 4))
    with pytest.raises(OffsetsOutOfOrderError):
        analyze_follower_records(data)
    ok = b"".join(build_batch(recs(2), base_offset=o) for o in (5, 7, 20))
    a = analyze_follower_records(ok)
    assert (a.first_offset, a.last_offset, a.num_messages) == (5, 21, 6)
    assert a.valid_bytes == len(ok)


# -- the fast record walk agrees with the full decoder ----------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

record_st = st.tuples(
    st.integers(-5, 10_000_000),  # timestamp delta: 1- to 4-byte varints
    st.one_of(st.none(), st.binary(max_size=200)),
    st.one_of(st.none(), st.binary(max_size=300)),
)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=90),
       codec=st.sampled_from(list(CompressionType)))
def test_walk_matches_decoder(records: list[tuple[int, bytes | None, bytes | None]],
                              codec: CompressionType) -> None:
    data = build_batch([(NOW + d, k, v) for d, k, v in records], codec)
    cfg = LogConfig.from_props({"cleanup.policy": "compact"})
    null_idx = [i for i, (_, k, _) in enumerate(records) if k is None]
    if null_idx:
        with pytest.raises(RecordValidationError) as ei:
            validate(data, cfg)
        assert [i for i, _ in ei.value.errors] == null_idx
    r = validate(data, offset=7)
    assert r.num_messages == len(records)
    assert r.max_timestamp == max(NOW + d for d, _, _ in records)
    assert not r.recompressed
    assert [x.offset for x in r.batch.iter_records()] == list(range(7, 7 + len(records)))
