"""Record batches -> pyarrow RecordBatches in exactly Spark's Kafka-source schema.

The Arrow schema must equal ``to_arrow_schema(spark_schema, timezone="UTC")`` or Spark fails
the read with DATA_SOURCE_RETURN_SCHEMA_MISMATCH, so it is spelled out here once:
binary, binary, string, int32, int64, timestamp[us, UTC], int32 (+ headers list<struct>).
Records are decoded by columns.py (one native pass over a run of batches, or its numpy twin)
straight into Arrow buffers; only records that carry headers take a per-record Python step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from tidelog.records import RecordBatch
from tidelog.records.batch import (
    _HEADER,
    COMPRESSION_MASK,
    CONTROL_MASK,
    RECORD_BATCH_OVERHEAD,
    Buffer,
)

from .columns import HEADER_ROW, SPAN_ROW, Columns, decode_columns, decode_runs
from .fetch_runs import COUNT, POS, SIZE, Run

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


class _Builder:
    """The records of one topic-partition collected for one Arrow batch."""

    def __init__(self, topic: str, partition: int, include_headers: bool,
                 start: int = 0, end: int = 2**63 - 1) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.start, self.end = start, end
        self.schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.payloads: list[Buffer | None] = []
        self._n = 0

    def __len__(self) -> int:
        """Records held (before the offset window is applied)."""
        return self._n


class ColumnBuilder(_Builder):
    """Collects the batches of one topic-partition and decodes them into one Arrow batch in
    a single pass (columns.decode_columns): per batch only its header is read here."""

    def _reset(self) -> None:
        super()._reset()
        self.batches: list[Buffer] = []

    def add_batch(self, batch: RecordBatch, attrs: int, count: int) -> None:
        """Take the batch's records (its header's attributes and record count given); those
        with offsets in [start, end) are kept at build."""
        self.batches.append(batch.buf)
        self.payloads.append(batch.records_payload() if attrs & COMPRESSION_MASK else None)
        self._n += max(count, 0)

    def build(self) -> pa.RecordBatch:
        c = decode_columns(self.batches, self.payloads, self.start, self.end, self.include_headers)
        out = _record_batch(self, c, self._payload)
        self._reset()
        return out

    def _payload(self, index: int) -> Buffer:
        given = self.payloads[index]
        return self.batches[index][RECORD_BATCH_OVERHEAD:] if given is None else given


class RunBuilder(_Builder):
    """ColumnBuilder for whole fetch responses: the batches chosen from each (fetch_runs.py)
    are decoded where they lie in the response's bytes (columns.decode_runs), in Arrow
    batches cut after the same batches as ColumnBuilder's."""

    def _reset(self) -> None:
        super()._reset()
        self.bufs: list[Buffer] = []
        self.spans: list[np.ndarray] = []

    def add(self, buf: Buffer, rows: np.ndarray, payloads: list[Buffer | None]) -> None:
        """Batches of ``buf`` at (position, size) = ``rows[:, :2]``, their record counts in
        ``rows[:, 2]``."""
        span = np.empty((len(rows), SPAN_ROW), dtype=np.int64)
        span[:, 0] = len(self.bufs)
        span[:, 1:] = rows[:, :2]
        self.bufs.append(buf)
        self.spans.append(span)
        self.payloads.extend(payloads)
        self._n += int(np.maximum(rows[:, 2], 0).sum())

    def build(self) -> pa.RecordBatch:
        spans = np.concatenate(self.spans) if self.spans else np.zeros((0, SPAN_ROW), np.int64)
        c = decode_runs(self.bufs, spans, self.payloads, self.start, self.end,
                        self.include_headers)
        out = _record_batch(self, c, lambda i: self._payload(spans, i))
        self._reset()
        return out

    def _payload(self, spans: np.ndarray, index: int) -> Buffer:
        given = self.payloads[index]
        if given is not None:
            return given
        b, pos, size = spans[index].tolist()
        return memoryview(self.bufs[b])[pos + RECORD_BATCH_OVERHEAD : pos + size]


def _record_batch(builder: _Builder, c: Columns,
                  payload: Callable[[int], Buffer]) -> pa.RecordBatch:
    n = c.num_rows
    arrays = [
        _binary(n, c.key_offsets, c.key_data, c.key_validity, c.key_nulls),
        _binary(n, c.value_offsets, c.value_data, c.value_validity, c.value_nulls),
        _repeated_string(builder.topic, n),
        pa.array(np.full(n, builder.partition, np.int32)),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(c.offsets)]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(c.timestamps)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(c.types)]),
    ]
    if builder.include_headers:
        arrays.append(pa.array(_header_column(c, n, payload), HEADER_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=builder.schema)


def _header_column(c: Columns, n: int, payload: Callable[[int], Buffer]) -> list[list[dict[str, object]] | None]:
    """Only records that carry headers cost a Python step; a record without headers reads
    as NULL, as in Spark's Kafka source (KafkaRecordToRowConverter)."""
    out: list[list[dict[str, object]] | None] = [None] * n
    rows = np.frombuffer(c.headers, np.int64).reshape(-1, HEADER_ROW).tolist()
    payloads: dict[int, bytes] = {}
    for row, index, pos, count in rows:
        if index not in payloads:
            payloads[index] = bytes(payload(index))
        out[row] = header_list(payloads[index], pos, count)
    return out


def _binary(n: int, offsets: bytes, data: bytes, validity: bytes | None, nulls: int) -> pa.Array:
    bitmap = None if validity is None else pa.py_buffer(validity)
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _repeated_string(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from its buffers (a list of ``n``
    Python strings cost more than decoding the batch's records)."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                   pa.py_buffer(raw * n)])


def header_list(buf: bytes, p: int, n: int) -> list[dict[str, object]]:
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
    cols = ColumnBuilder(topic, partition, include_headers, start, end)
    for batch in batches:
        if len(batch.buf) <= RECORD_BATCH_OVERHEAD:
            continue
        h = _HEADER.unpack_from(batch.buf)  # one header read per batch
        if h[5] & CONTROL_MASK:
            continue
        cols.add_batch(batch, h[5], h[12])
        if len(cols) >= rows_per_batch:
            yield cols.build()
    if len(cols):
        yield cols.build()


def runs_to_arrow(
    runs: Iterable[Run],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
) -> Iterator[pa.RecordBatch]:
    """``batches_to_arrow`` for fetch runs (control batches already left out): the same
    records in Arrow batches cut after the same batches."""
    cols = RunBuilder(topic, partition, include_headers, start, end)
    for run in runs:
        rows = run.rows[:, [POS, SIZE, COUNT]]
        counts = np.cumsum(np.maximum(rows[:, 2], 0))
        done = 0  # rows of this run handed to the builder
        while done < len(rows):
            before = int(counts[done - 1]) if done else 0
            need = rows_per_batch - len(cols) + before  # the cumulative count that fills it
            cut = int(np.searchsorted(counts, need, "left")) + 1
            if cut > len(rows):
                cols.add(run.records, rows[done:], run.payloads[done:])
                break
            cols.add(run.records, rows[done:cut], run.payloads[done:cut])
            done = cut
            yield cols.build()
    if len(cols):
        yield cols.build()
