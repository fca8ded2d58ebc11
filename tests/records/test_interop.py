"""Our batches against independent codecs: kafka-python's and aiokafka's builders/readers."""

from __future__ import annotations

import aiokafka.record.default_records as ak
import kafka.record.default_records as kp
import pytest
from kafka.record import MemoryRecords as KpMemoryRecords

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder, iter_batches

RECORDS = [
    (1_600_000_000_000 + i * 7, (f"key-{i}".encode() if i % 5 else None),
     (f"value-{i}-".encode() * (i % 9) if i % 7 else None),
     [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else [])
    for i in range(50)
]
CODECS = list(CompressionType)


def _ours(codec: CompressionType) -> bytes:
    b = RecordBatchBuilder(codec, base_offset=42, producer_id=9, producer_epoch=2, base_sequence=0)
    for ts, k, v, h in RECORDS:
        b.append(ts, k, v, h)
    return b.build()


def _expected() -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [(42 + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_ours(codec: CompressionType) -> None:
    mr = KpMemoryRecords(_ours(codec))
    batch = mr.next_batch()
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]) for r in batch]
    assert got == [(o, t, k, v, [tuple(x) for x in h]) for o, t, k, v, h in _expected()]
    assert mr.next_batch() is None


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_reads_ours(codec: CompressionType) -> None:
    batch = ak.DefaultRecordBatch(bytearray(_ours(codec)))
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]) for r in batch]
    assert got == [(o, t, k, v, [tuple(x) for x in h]) for o, t, k, v, h in _expected()]


def _check_ours_reads(data: bytes) -> None:
    (batch,) = list(iter_batches(data))
    assert batch.is_valid()
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    want = [(i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(RECORDS)]
    assert got == want


@pytest.mark.parametrize("codec", CODECS)
def test_ours_reads_kafka_python(codec: CompressionType) -> None:
    b = kp.DefaultRecordBatchBuilder(2, int(codec), False, 9, 2, 0, batch_size=1 << 30)
    for i, (ts, k, v, h) in enumerate(RECORDS):
        b.append(i, ts, k, v, h)
    data = bytes(b.build())
    _check_ours_reads(data)
    assert RecordBatch(data).compression is codec


@pytest.mark.parametrize("codec", CODECS)
def test_ours_reads_aiokafka(codec: CompressionType) -> None:
    b = ak.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=9, producer_epoch=2, base_sequence=0, batch_size=1 << 30,
    )
    for i, (ts, k, v, h) in enumerate(RECORDS):
        b.append(i, ts, k, v, h)
    _check_ours_reads(bytes(b.build()))


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    b = kp.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
    ours = RecordBatchBuilder()
    for i, (ts, k, v, h) in enumerate(RECORDS):
        b.append(i, ts, k, v, h)
        ours.append(ts, k, v, h)
    theirs = bytearray(b.build())
    # kafka-python leaves partitionLeaderEpoch at 0; Kafka's "none" is -1 (outside the CRC).
    theirs[12:16] = b"\xff\xff\xff\xff"
    assert ours.build() == bytes(theirs)
