"""A flush's raw columns (iceberg/record_columns.py raw_columns, its own wrapping of the
columnar pass) hold exactly what the Spark source's Arrow batches of the same records hold
(spark/arrow.py batches_to_arrow, the reference), with an empty header list where Spark has
NULL: runs of batches with null keys and values, headers, gaps, LogAppendTime, compressed
and control batches, any offset window."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.record_columns import RAW_SCHEMA, kafka_struct, raw_columns
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder, TimestampType
from tidelog.records.batch import ControlRecordType
from tidelog.spark.arrow import batches_to_arrow


def reference(batches: list[RecordBatch], partition: int, start: int, end: int) -> pa.Table:
    parts = list(batches_to_arrow(batches, topic="", partition=partition, start=start,
                                  end=end, include_headers=True, rows_per_batch=2**62))
    if not parts:
        return RAW_SCHEMA.empty_table()
    t = pa.Table.from_batches(parts)
    headers = [h if h is not None else [] for h in t.column("headers").to_pylist()]
    return pa.Table.from_arrays(
        [t.column("partition"), t.column("offset"), t.column("timestamp"),
         pa.array(headers, RAW_SCHEMA.field("headers").type),
         t.column("key").cast(RAW_SCHEMA.field("key").type),
         t.column("value")], schema=RAW_SCHEMA)


@st.composite
def batch(draw: st.DrawFn, base: int) -> RecordBatch:
    if draw(st.integers(0, 9)) == 0:
        marker = RecordBatchBuilder(base_offset=base, is_control=True, is_transactional=True,
                                    producer_id=1, producer_epoch=0)
        marker.append_control(ControlRecordType.COMMIT, 0)
        return RecordBatch(marker.build())
    lat = draw(st.booleans())
    b = RecordBatchBuilder(
        base_offset=base,
        compression=draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP])),
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        log_append_time=draw(st.integers(0, 2**41)) if lat else None)
    offset = base - 1
    for _ in range(draw(st.integers(1, 8))):
        offset += draw(st.integers(1, 3))
        headers = draw(st.lists(st.tuples(st.sampled_from(["h", "é", ""]),
                                          st.one_of(st.none(), st.binary(max_size=4))),
                                max_size=2))
        b.append(draw(st.integers(0, 2**41)), draw(st.one_of(st.none(), st.binary(max_size=9))),
                 draw(st.one_of(st.none(), st.binary(max_size=30))), headers, offset=offset)
    return RecordBatch(b.build())


@st.composite
def run(draw: st.DrawFn) -> list[RecordBatch]:
    out, base = [], draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(0, 5))):
        b = draw(batch(base))
        out.append(b)
        base = b.next_offset
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run(), st.integers(0, 5), st.integers(0, 1100), st.integers(0, 1200))
def test_raw_columns_equal_the_spark_decoders(batches: list[RecordBatch], partition: int,
                                              start: int, end: int) -> None:
    got = raw_columns(batches, partition, start, end)
    assert got.schema == RAW_SCHEMA
    assert got.equals(reference(batches, partition, start, end))


def test_kafka_struct_takes_the_raw_columns_as_they_are() -> None:
    """The raw columns are in the tables' own types: the kafka struct holds their buffers
    (no cast, no copy)."""
    b = RecordBatchBuilder(base_offset=0)
    for i in range(5):
        b.append(1000 + i, b"k%d" % i if i % 2 else None, b"v", [("h", b"x")] if i == 3 else [],
                 offset=i)
    raw = raw_columns([RecordBatch(b.build())], 2, 0, 5)
    type_ = arrow_schema(table_schema(None)).field(KAFKA).type
    got = kafka_struct(raw, type_)
    assert got.type == type_
    for i, f in enumerate(type_):
        column = raw.column(f.name).chunk(0)
        assert [b.address if b else 0 for b in got.field(i).buffers()] == [
            b.address if b else 0 for b in column.buffers()], f.name
    assert got.field("key").to_pylist() == [None, b"k1", None, b"k3", None]
    assert got.field("headers").to_pylist()[3] == [{"key": "h", "value": b"x"}]
