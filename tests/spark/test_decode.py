"""The Arrow decoding paths (vectorised and per-record) against records.iter_records (no Spark)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder, TimestampType
from tidelog.spark.arrow import arrow_schema, batches_to_arrow


def _random_batches(seed: int, codec: CompressionType) -> list[RecordBatch]:
    rnd = random.Random(seed)
    out = []
    offset = 0
    for b in range(12):
        lat = b % 5 == 4
        builder = RecordBatchBuilder(
            codec, base_offset=offset,
            timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
            log_append_time=9_999_999 if lat else None,
        )
        for _ in range(rnd.randint(1, 60)):
            offset += rnd.choice([1, 1, 1, 3])  # gaps, as compaction leaves them
            key = None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 5, 70, 300]))
            value = None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice([0, 1, 63, 64, 200, 20000]))
            headers = [("h", rnd.randbytes(3)), ("n", None)][: rnd.randint(0, 2)]
            builder.append(1_000_000 + rnd.randint(-5000, 5000), key, value, headers, offset=offset)
        out.append(RecordBatch(builder.build()))
        offset += 1
    return out


@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_arrow_matches_iter_records(codec: CompressionType, include_headers: bool) -> None:
    batches = _random_batches(7, codec)
    all_records = [(b, r) for b in batches for r in b.iter_records()]
    lo, hi = all_records[10][1].offset, all_records[-10][1].offset
    expected = [
        (r.key, r.value, r.offset, (b.max_timestamp if b.timestamp_type == 1 else r.timestamp) * 1000,
         int(b.timestamp_type), [{"key": k, "value": v} for k, v in r.headers] or None)
        for b, r in all_records if lo <= r.offset < hi
    ]
    got_batches = list(batches_to_arrow(batches, topic="t", partition=3, start=lo, end=hi,
                                        include_headers=include_headers, rows_per_batch=100))
    assert len(got_batches) > 1
    table = pa.Table.from_batches(got_batches)
    assert table.schema == arrow_schema(include_headers)
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows = list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                    table.column("offset").to_pylist(), ts, table.column("timestampType").to_pylist(),
                    strict=True))
    assert rows == [e[:5] for e in expected]
    assert set(table.column("topic").to_pylist()) == {"t"}
    assert set(table.column("partition").to_pylist()) == {3}
    if include_headers:
        assert table.column("headers").to_pylist() == [e[5] for e in expected]


def test_empty_and_control_batches_are_skipped() -> None:
    control = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=1, producer_epoch=0)
    from tidelog.records import ControlRecordType

    control.append_control(ControlRecordType.COMMIT, 5)
    data = RecordBatchBuilder(base_offset=1)
    data.append(5, b"k", b"v")
    batches = [RecordBatch(control.build()), RecordBatch(RecordBatchBuilder(base_offset=5).build()),
               RecordBatch(data.build())]
    out = list(batches_to_arrow(batches, topic="t", partition=0, start=0, end=10, include_headers=False))
    assert [b.num_rows for b in out] == [1]
    assert out[0].column(1).to_pylist() == [b"v"]
