"""The pure core of compaction: filter the records of v2 batches (Kafka's MemoryRecords.filterTo).

Given batches and a filter (which batches to keep, which records to keep), produce the
cleaned bytes:

* a batch whose records are all kept, and which needs no delete horizon, is copied as is;
* otherwise it is rebuilt with the same baseOffset, lastOffsetDelta, producer fields,
  partition leader epoch and codec (re-compressed), each kept record keeping its offset and
  its key/value/header bytes; only the timestamp delta is re-encoded when the base timestamp
  moves (first record dropped, or delete horizon set);
* the first pass that keeps a tombstone (or a marker of an emptied transaction) sets the
  delete horizon: attribute bit 6 with baseTimestamp = now + delete.retention.ms (#134);
* a batch left without records is dropped, unless the filter says RETAIN_EMPTY (a producer's
  last batch, the round's last batch): then a 61-byte header with count 0 and baseTimestamp
  -1 stays (#135).

Records are scanned without decoding headers or values: the cleaner needs only the offset,
the key and whether a value is present.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from tidelog._native import core as _native_core
from tidelog.records import (
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    InvalidRecordError,
    RecordBatch,
    assemble_batch,
    compress,
)
from tidelog.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from tidelog.records.varint import write_varint

Buffer = bytes | bytearray | memoryview


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch without looking at its records
    DELETE_EMPTY = "delete_empty"  # drop it if no record is kept
    RETAIN_EMPTY = "retain_empty"  # keep at least its header


class BatchRetentionResult(NamedTuple):
    retention: BatchRetention
    contains_marker_for_empty_txn: bool = False


class ScannedRecord(NamedTuple):
    """One record located inside a batch's (decompressed) payload."""

    offset: int
    timestamp: int  # as stored: baseTimestamp + delta
    key: bytes | None
    has_value: bool
    start: int  # position of the length varint
    attr_pos: int  # position of the attributes byte
    ts_end: int  # position just after the timestamp-delta varint
    end: int  # position after the record


class RecordFilter(Protocol):
    current_time: int
    delete_retention_ms: int

    def check_batch_retention(self, batch: RecordBatch) -> BatchRetentionResult: ...

    def should_retain_record(self, batch: RecordBatch, record: ScannedRecord) -> bool: ...


@dataclass
class FilterResult:
    """What ``filter_to`` wrote and the totals Kafka's CleanerStats keeps."""

    output: bytearray = field(default_factory=bytearray)
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    max_offset: int = -1
    max_timestamp: int = NO_TIMESTAMP
    shallow_offset_of_max_timestamp: int = -1

    def _update(self, max_ts: int, shallow_offset: int, max_offset: int, n: int, size: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.shallow_offset_of_max_timestamp = shallow_offset
        self.max_offset = max(self.max_offset, max_offset)
        self.messages_retained += n
        self.bytes_retained += size


def _raw_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned (still zig-zag encoded) varint at ``pos`` and the position after it."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")


def scan_records(batch: RecordBatch) -> tuple[bytes, list[ScannedRecord]]:
    """Locate every record of ``batch``; returns the (decompressed) payload and the records.

    Raises InvalidRecordError on malformed records or a count mismatch.
    """
    payload = bytes(batch.records_payload())
    try:
        records, end = _scan(payload, batch.base_offset, batch.base_timestamp,
                             batch.records_count)
    except IndexError:
        raise InvalidRecordError("record runs past the end of the batch") from None
    if end != len(payload):
        raise InvalidRecordError(
            f"{len(payload) - end} bytes left after the {batch.records_count} records declared")
    return payload, records


def _scan_py(payload: bytes, base_offset: int, base_ts: int, count: int
            ) -> tuple[list[ScannedRecord], int]:
    """The cleaner's hot loop: varints of one or two bytes are decoded inline, longer ones by
    ``_raw_varint``; values and headers are skipped, not decoded."""
    out: list[ScannedRecord] = []
    append, rv, new_tuple = out.append, _raw_varint, tuple.__new__
    pos, limit = 0, len(payload)
    for _ in range(count):
        start, length = pos, payload[pos]
        if length < 0x80:
            attr_pos = pos + 1
        elif payload[pos + 1] < 0x80:  # two bytes: records of 64..8191 bytes
            length, attr_pos = (length & 0x7F) | (payload[pos + 1] << 7), pos + 2
        else:
            length, attr_pos = rv(payload, pos)
        length = (length >> 1) ^ -(length & 1)
        end = attr_pos + length
        if length < 0 or end > limit:
            raise InvalidRecordError(f"record length {length} runs past the batch")
        raw, ts_end = payload[attr_pos + 1], attr_pos + 2
        if raw >= 0x80:
            raw, ts_end = rv(payload, attr_pos + 1)
        raw_off, p = payload[ts_end], ts_end + 1
        if raw_off >= 0x80:
            if payload[p] < 0x80:
                raw_off, p = (raw_off & 0x7F) | (payload[p] << 7), p + 1
            else:
                raw_off, p = rv(payload, ts_end)
        klen, p = payload[p], p + 1
        if klen >= 0x80:
            klen, p = rv(payload, p - 1)
        klen = (klen >> 1) ^ -(klen & 1)
        key = None
        if klen >= 0:
            key, p = payload[p : p + klen], p + klen
        if p >= end or klen < -1:
            raise InvalidRecordError("record fields run past the record")
        append(new_tuple(ScannedRecord, (  # ScannedRecord(...) without its Python __new__
            base_offset + ((raw_off >> 1) ^ -(raw_off & 1)), base_ts + ((raw >> 1) ^ -(raw & 1)),
            key, payload[p] != 1, start, attr_pos, ts_end, end)))
        pos = end
    return out, pos


def _scan_native(payload: bytes, base_offset: int, base_ts: int, count: int
                 ) -> tuple[list[ScannedRecord], int]:
    """The native twin of ``_scan_py`` (tidelog._native): same records, same errors."""
    assert _native_core is not None
    records, end = _native_core.scan(payload, base_offset, base_ts, count, ScannedRecord)
    return records, end


_scan = _scan_native if _native_core is not None else _scan_py


def _records_body(payload: Buffer, kept: list[ScannedRecord], base_ts: int, orig_base_ts: int) -> bytes:
    if base_ts == orig_base_ts:
        return b"".join(payload[r.start : r.end] for r in kept)
    out = bytearray()
    for r in kept:
        body = bytearray(payload[r.attr_pos : r.attr_pos + 1])
        write_varint(body, r.timestamp - base_ts)
        body += payload[r.ts_end : r.end]
        write_varint(out, len(body))
        out += body
    return bytes(out)


def rebuild_batch(
    batch: RecordBatch, payload: Buffer, kept: list[ScannedRecord], delete_horizon_ms: int | None
) -> tuple[bytes, int]:
    """The batch with only ``kept`` records; returns (bytes, max timestamp)."""
    attrs = batch.attributes
    log_append = bool(attrs & TIMESTAMP_TYPE_MASK)
    if delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_MASK
        base_ts = delete_horizon_ms
    else:
        attrs &= ~DELETE_HORIZON_MASK
        base_ts = kept[0].timestamp
    max_ts = batch.max_timestamp if log_append else max(r.timestamp for r in kept)
    body = _records_body(payload, kept, base_ts, batch.base_timestamp)
    data = assemble_batch(
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        attributes=attrs,
        last_offset_delta=batch.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        records_count=len(kept),
        payload=compress(attrs & COMPRESSION_MASK, body),
    )
    return data, max_ts


def empty_batch_header(batch: RecordBatch) -> bytes:
    """Kafka's writeEmptyHeader: same offsets and producer fields, no records, no codec."""
    attrs = batch.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return assemble_batch(
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        attributes=attrs,
        last_offset_delta=batch.last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        records_count=0,
        payload=b"",
    )


def filter_batch(
    batch: RecordBatch, record_filter: RecordFilter, result: FilterResult
) -> bytes | None:
    """Filter one batch into ``result`` (counts and output); returns the bytes written."""
    retention, marker_for_empty_txn = record_filter.check_batch_retention(batch)
    result.bytes_read += batch.size_in_bytes
    if retention is BatchRetention.DELETE:
        result.messages_read += max(0, batch.records_count)
        return None
    payload, records = scan_records(batch)
    result.messages_read += len(records)
    retain = getattr(record_filter, "retain_records", None)  # a whole batch at once
    kept = retain(batch, records) if retain is not None else \
        [r for r in records if record_filter.should_retain_record(batch, r)]
    if kept:
        has_tombstone = any(not r.has_value for r in kept)
        need_horizon = (has_tombstone or marker_for_empty_txn) and not batch.has_delete_horizon
        if len(kept) == len(records) and not need_horizon:
            data = bytes(batch.buf)
            result._update(batch.max_timestamp, batch.last_offset, batch.last_offset,
                           len(kept), len(data))
        else:
            horizon = (
                record_filter.current_time + record_filter.delete_retention_ms
                if need_horizon
                else batch.delete_horizon_ms
            )
            data, max_ts = rebuild_batch(batch, payload, kept, horizon)
            result._update(max_ts, batch.last_offset, kept[-1].offset, len(kept), len(data))
    elif retention is BatchRetention.RETAIN_EMPTY:
        data = empty_batch_header(batch)
        result._update(batch.max_timestamp, batch.last_offset, batch.last_offset, 0,
                       RECORD_BATCH_OVERHEAD)
    else:
        return None
    result.output += data
    return data


def filter_to(batches: Iterable[RecordBatch], record_filter: RecordFilter) -> FilterResult:
    """Filter consecutive batches; the kept bytes are in ``result.output``."""
    result = FilterResult()
    for batch in batches:
        filter_batch(batch, record_filter, result)
    return result
