"""A flush's committed records as Arrow columns, decoded in bulk: the record batches stay
bytes until one columnar pass per partition (the Spark source's decoder, ``decode_columns``:
the native core's when built, else its numpy twin) gives the partition, offset, timestamp,
headers, key and value of every record at once. Only records that carry headers take a
Python step (their header lists).

The ``kafka`` struct column of the tables is built from these columns, and a DLQ row from
one of their rows."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidelog.records import Record, RecordBatch
from tidelog.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    RECORD_BATCH_OVERHEAD,
    Buffer,
)
from tidelog.spark.arrow import header_list
from tidelog.spark.columns import HEADER_ROW, Columns, decode_columns

from .value_codec import strip_prefix as strip_prefix  # its home: the codecs' framing

PARTITION, OFFSET, TIMESTAMP, HEADERS, KEY, VALUE = (
    "partition", "offset", "timestamp", "headers", "key", "value")
HEADER = pa.struct([("key", pa.large_string()), ("value", pa.large_binary())])
# The kafka struct's columns in the table's own Arrow types (pyiceberg's: large offsets, a
# list's item named "element"), so that the struct is built without a cast; the value keeps
# 32-bit offsets (what the value decoders read).
RAW_SCHEMA = pa.schema([
    (PARTITION, pa.int32()), (OFFSET, pa.int64()), (TIMESTAMP, pa.timestamp("us", tz="UTC")),
    (HEADERS, pa.large_list(pa.field("element", HEADER))), (KEY, pa.large_binary()),
    (VALUE, pa.binary()),
])
_NO_HEADERS = pa.array([], HEADER)
_BINARY = pa.binary()
_ATTRIBUTES = struct.Struct(">h")  # a batch's attributes, at byte 21 of its header


def empty_raw() -> pa.Table:
    return RAW_SCHEMA.empty_table()


def raw_columns(batches: Sequence[RecordBatch | memoryview], partition: int, start: int,
                end: int) -> pa.Table:
    """The records with offsets in [start, end) of ``batches`` (data batches of one
    partition, as RecordBatch objects or views of their bytes), as a table of RAW_SCHEMA. A
    record without headers has an empty list.

    One ``decode_columns`` pass over the batches; its buffers become the columns as they
    are (the Spark source's own columns, topic and timestamp type, are not built)."""
    bufs: list[Buffer] = []
    payloads: list[Buffer | None] = []
    for batch in batches:
        buf = batch.buf if isinstance(batch, RecordBatch) else batch
        if len(buf) <= RECORD_BATCH_OVERHEAD:
            continue
        (attrs,) = _ATTRIBUTES.unpack_from(buf, 21)
        if attrs & CONTROL_MASK:
            continue
        bufs.append(buf)
        payloads.append(RecordBatch(buf).records_payload() if attrs & COMPRESSION_MASK
                        else None)
    if not bufs:
        return empty_raw()
    c = decode_columns(bufs, payloads, start, end, True)
    n = c.num_rows
    return pa.Table.from_arrays([
        pa.array(np.full(n, partition, np.int32)),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(c.offsets)]),
        pa.Array.from_buffers(RAW_SCHEMA.field(TIMESTAMP).type, n,
                              [None, pa.py_buffer(c.timestamps)]),
        _header_lists(c, n, bufs, payloads),
        _binary(n, np.frombuffer(c.key_offsets, np.int32).astype(np.int64), c.key_data,
                c.key_validity, c.key_nulls, pa.large_binary()),
        _binary(n, c.value_offsets, c.value_data, c.value_validity, c.value_nulls),
    ], schema=RAW_SCHEMA)


def _binary(n: int, offsets: bytes | np.ndarray, data: bytes, validity: bytes | None,
            nulls: int, type_: pa.DataType = _BINARY) -> pa.Array:
    bitmap = None if validity is None else pa.py_buffer(validity)
    return pa.Array.from_buffers(type_, n, [bitmap, pa.py_buffer(offsets),
                                            pa.py_buffer(data)], null_count=nulls)


def _header_lists(c: Columns, n: int, bufs: Sequence[Buffer],
                  payloads: Sequence[Buffer | None]) -> pa.Array:
    """The headers column: an empty list for each record without headers (no Python step
    for those), the decoded headers (Spark's decoder's ``header_list``) for the others."""
    rows = np.frombuffer(c.headers, np.int64).reshape(-1, HEADER_ROW)
    if not len(rows):  # no record has headers: n empty lists
        return pa.LargeListArray.from_arrays(pa.array(np.zeros(n + 1, np.int64)), _NO_HEADERS,
                                             type=RAW_SCHEMA.field(HEADERS).type)
    counts = np.zeros(n + 1, np.int64)
    flat: list[dict[str, object]] = []
    decoded: dict[int, bytes] = {}
    for row, index, pos, count in rows.tolist():
        if index not in decoded:
            given = payloads[index]
            decoded[index] = bytes(memoryview(bufs[index])[RECORD_BATCH_OVERHEAD:]
                                   if given is None else given)
        got = header_list(decoded[index], pos, count)
        counts[row + 1] = len(got)
        flat.extend(got)
    offsets = np.cumsum(counts, dtype=np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat, HEADER),
                                    type=RAW_SCHEMA.field(HEADERS).type)


def kafka_struct(raw: pa.Table, type_: pa.StructType) -> pa.StructArray:
    """The ``kafka`` column (partition, offset, timestamp, headers, key) of ``raw``'s rows
    (cast only where ``type_`` differs from RAW_SCHEMA's: the tables' types are the same)."""
    arrays = []
    for f in type_:
        c = raw.column(f.name)
        a = c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()
        arrays.append(a if a.type == f.type else a.cast(f.type))
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
