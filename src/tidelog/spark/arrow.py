"""Record batches -> pyarrow RecordBatches in exactly Spark's Kafka-source schema.

The Arrow schema must equal ``to_arrow_schema(spark_schema, timezone="UTC")`` or Spark fails
the read with DATA_SOURCE_RETURN_SCHEMA_MISMATCH, so it is spelled out here once:
binary, binary, string, int32, int64, timestamp[us, UTC], int32 (+ headers list<struct>).
Records are decoded by decode.py (vectorised with numpy) straight into Arrow buffers; only
records that carry headers take a per-record Python step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from tidelog.records import RecordBatch
from tidelog.records.batch import RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK

from .decode import BinaryColumn, decode_records

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BASE_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]
DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
DDL_WITH_HEADERS = DDL + ", headers array<struct<key: string, value: binary>>"
DEFAULT_ROWS_PER_BATCH = 65536


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(BASE_FIELDS)
    if include_headers:
        fields.append(("headers", HEADER_TYPE))
    return pa.schema(fields)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


class ColumnBuilder:
    """Accumulates rows of one topic-partition column by column."""

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.key_col = BinaryColumn()
        self.value_col = BinaryColumn()
        self.offset_parts: list[np.ndarray] = []
        self.ts_parts: list[np.ndarray] = []
        self.type_parts: list[np.ndarray] = []
        self.headers: list[list[dict[str, object]] | None] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add_batch(self, batch: RecordBatch, start: int, end: int) -> None:
        """Append the batch's records with offsets in [start, end)."""
        (base_offset, _l, _e, _m, _c, attrs, _lod, base_ts, max_ts, _pid, _pe, _bs, count) = batch.header()
        payload = batch.records_payload()
        buf = payload if isinstance(payload, bytes) else bytes(payload)
        dec = decode_records(buf, count, base_offset, start, end, headers=self.include_headers)
        n = len(dec.offsets)
        if not n:
            return
        data = np.frombuffer(buf, dtype=np.uint8)
        self.key_col.add(data, dec.key_pos, dec.key_len)
        self.value_col.add(data, dec.value_pos, dec.value_len)
        self.offset_parts.append(dec.offsets)
        log_append = attrs & TIMESTAMP_TYPE_MASK
        stamps = np.full(n, max_ts, np.int64) if log_append else dec.ts_deltas + base_ts
        self.ts_parts.append(stamps * 1000)
        self.type_parts.append(np.full(n, 1 if log_append else 0, np.int32))
        if self.include_headers:
            # only records that carry headers cost a Python step; a record without headers
            # reads as NULL, as in Spark's Kafka source (KafkaRecordToRowConverter)
            headers: list[list[dict[str, object]] | None] = [None] * n
            for i in np.flatnonzero(dec.header_count):
                headers[i] = _headers(buf, int(dec.header_pos[i]), int(dec.header_count[i]))
            self.headers.extend(headers)
        self._n += n

    def build(self) -> pa.RecordBatch:
        n = self._n
        arrays = [
            self.key_col.build(),
            self.value_col.build(),
            _repeated_string(self.topic, n),
            pa.array(np.full(n, self.partition, np.int32)),
            pa.array(_concat(self.offset_parts, np.int64)),
            pa.array(_concat(self.ts_parts, np.int64)).cast(pa.timestamp("us", tz="UTC")),
            pa.array(_concat(self.type_parts, np.int32)),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADER_TYPE))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _repeated_string(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from its buffers (a list of ``n``
    Python strings cost more than decoding the batch's records)."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                   pa.py_buffer(raw * n)])


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _headers(buf: bytes, p: int, n: int) -> list[dict[str, object]]:
    """``n`` headers starting at ``p`` (just after the header-count varint)."""
    out: list[dict[str, object]] = []
    for _ in range(n):
        klen, p = _varint(buf, p)
        key = buf[p : p + klen].decode("utf-8", "replace")
        p += klen
        vlen, p = _varint(buf, p)
        if vlen < 0:
            out.append({"key": key, "value": None})
        else:
            out.append({"key": key, "value": buf[p : p + vlen]})
            p += vlen
    return out


def batches_to_arrow(
    batches: Iterable[RecordBatch],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the data records in [start, end); control batches are skipped."""
    cols = ColumnBuilder(topic, partition, include_headers)
    for batch in batches:
        if batch.is_control or batch.size_in_bytes <= RECORD_BATCH_OVERHEAD:
            continue
        cols.add_batch(batch, start, end)
        if len(cols) >= rows_per_batch:
            yield cols.build()
    if len(cols):
        yield cols.build()
