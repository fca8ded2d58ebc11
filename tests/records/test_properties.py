"""Hypothesis round trips: anything we build, we (and kafka-python) read back identically."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords as KpMemoryRecords

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder, iter_batches

opt_bytes = st.one_of(st.none(), st.binary(max_size=64))
header = st.tuples(st.text(max_size=8), opt_bytes)
record = st.tuples(
    st.integers(min_value=-1, max_value=2**45), opt_bytes, opt_bytes, st.lists(header, max_size=3)
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=20),
    codec=st.sampled_from(list(CompressionType)),
    base=st.integers(min_value=0, max_value=2**40),
)
def test_round_trip(records: list, codec: CompressionType, base: int) -> None:
    b = RecordBatchBuilder(codec, base_offset=base)
    for ts, k, v, h in records:
        b.append(ts, k, v, h)
    data = b.build()
    (batch,) = list(iter_batches(data + data[: len(data) // 2]))
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    want = [(base + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)]
    assert got == want
    assert batch.max_timestamp == max(r[0] for r in records)
    kp = KpMemoryRecords(data).next_batch()
    assert [(r.offset, r.key, r.value) for r in kp] == [(o, k, v) for o, _t, k, v, _h in want]


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(min_value=0, max_value=69), bit=st.integers(min_value=0, max_value=7))
def test_any_bit_flip_in_covered_bytes_is_detected(pos: int, bit: int) -> None:
    b = RecordBatchBuilder()
    b.append(1000, b"k", b"v")
    data = bytearray(b.build())
    data[pos] ^= 1 << bit
    batch = RecordBatch(data)
    if pos < 8 or 12 <= pos < 16:
        assert batch.is_valid()  # baseOffset / partitionLeaderEpoch sit outside the CRC
    elif pos >= 16:
        assert not batch.is_valid()  # magic, the CRC itself, or CRC-covered bytes
