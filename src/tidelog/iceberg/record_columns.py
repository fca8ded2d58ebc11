"""A flush's committed records as Arrow columns, decoded in bulk: the record batches stay
bytes until one columnar pass per partition (the Spark source's decoder, ``decode_columns``:
the native core's when built, else its numpy twin) gives the partition, offset, timestamp,
headers, key and value of every record at once. Only records that carry headers take a
Python step (their header lists).

The ``kafka`` struct column of the tables is built from these columns, and a DLQ row from
one of their rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelog.records import Record, RecordBatch
from tidelog.spark.arrow import batches_to_arrow

from .value_codec import strip_prefix as strip_prefix  # its home: the codecs' framing

PARTITION, OFFSET, TIMESTAMP, HEADERS, KEY, VALUE = (
    "partition", "offset", "timestamp", "headers", "key", "value")
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
RAW_SCHEMA = pa.schema([
    (PARTITION, pa.int32()), (OFFSET, pa.int64()), (TIMESTAMP, pa.timestamp("us", tz="UTC")),
    (HEADERS, pa.list_(HEADER)), (KEY, pa.binary()), (VALUE, pa.binary()),
])
_ALL_ROWS = 2**62  # one Arrow batch per partition read


def empty_raw() -> pa.Table:
    return RAW_SCHEMA.empty_table()


def raw_columns(batches: Sequence[RecordBatch], partition: int, start: int,
                end: int) -> pa.Table:
    """The records with offsets in [start, end) of ``batches`` (data batches of one
    partition), as a table of RAW_SCHEMA. A record without headers has an empty list."""
    parts = list(batches_to_arrow(batches, topic="", partition=partition, start=start,
                                  end=end, include_headers=True, rows_per_batch=_ALL_ROWS))
    if not parts:
        return empty_raw()
    rb = parts[0] if len(parts) == 1 else pa.Table.from_batches(parts).combine_chunks(
    ).to_batches()[0]
    return pa.Table.from_arrays(
        [rb.column(PARTITION), rb.column(OFFSET), rb.column(TIMESTAMP),
         _no_null_lists(rb.column(HEADERS)), rb.column(KEY), rb.column(VALUE)],
        schema=RAW_SCHEMA)


def _no_null_lists(headers: pa.Array) -> pa.Array:
    """The Spark decoder's NULL (no headers) as an empty list, the tables' convention."""
    if headers.null_count == 0:
        return headers.cast(RAW_SCHEMA.field(HEADERS).type)
    assert isinstance(headers, pa.ListArray)
    offsets = np.frombuffer(headers.buffers()[1], np.int32)[
        headers.offset: headers.offset + len(headers) + 1]
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                    headers.values.cast(HEADER))


def kafka_struct(raw: pa.Table, type_: pa.StructType) -> pa.StructArray:
    """The ``kafka`` column (partition, offset, timestamp, headers, key) of ``raw``'s rows."""
    names = [type_.field(i).name for i in range(type_.num_fields)]
    arrays = [raw.column(n).combine_chunks().cast(type_.field(n).type) for n in names]
    return pa.StructArray.from_arrays(arrays, fields=list(type_))


def records_of(raw: pa.Table, rows: Sequence[int]) -> list[tuple[int, Record]]:
    """(partition, Record) of some rows (the DLQ's path: rare, so row by row)."""
    taken = raw.take(pa.array(rows, pa.int64()))
    millis = pc.divide(taken.column(TIMESTAMP).cast(pa.int64()), 1000).to_pylist()
    out = []
    for r, ts in zip(taken.to_pylist(), millis, strict=True):
        headers = [(h["key"], h["value"]) for h in r[HEADERS] or []]
        out.append((int(r[PARTITION]), Record(r[OFFSET], ts, r[KEY], r[VALUE], headers)))
    return out
