"""The two header fields the broker's hot paths read without parsing a batch."""

from __future__ import annotations

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.records.batch import (
    COMPRESSION_MASK,
    TRANSACTIONAL_MASK,
    peek_attributes,
    peek_magic,
)


def test_peek_reads_what_the_parser_reads() -> None:
    for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4):
        for txn in (False, True):
            b = RecordBatchBuilder(codec, producer_id=7 if txn else -1,
                                   producer_epoch=0 if txn else -1, is_transactional=txn)
            b.append(1, b"k", b"v")
            raw = b.build()
            parsed = RecordBatch(memoryview(raw))
            assert peek_magic(raw) == parsed.magic == 2
            assert peek_attributes(raw) == parsed.attributes
            assert peek_attributes(raw) & COMPRESSION_MASK == codec.value
            assert bool(peek_attributes(raw) & TRANSACTIONAL_MASK) is txn


def test_peek_at_too_short_a_buffer() -> None:
    assert peek_magic(b"\x00" * 16) == -1
    assert peek_attributes(b"\x00" * 22) == 0
