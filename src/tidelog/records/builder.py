"""RecordBatchBuilder (Kafka's MemoryRecordsBuilder) for tests, the CLI and the Spark writer."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .batch import (
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    ControlRecordType,
    TimestampType,
    crc32c,
)
from .compression import CompressionType, compress
from .varint import write_varint

Header = tuple[str, bytes | None]

_HEADER = struct.Struct(">qiibIhiqqqhii")


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one encoded record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # attributes: unused, written as 0
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    write_varint(body, len(headers))
    for hkey, hval in headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hval)
    write_varint(out, len(body))
    out += body


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


class RecordBatchBuilder:
    """Accumulate records, then ``build()`` one v2 batch as bytes.

    Offsets default to consecutive deltas from ``base_offset``; an explicit ``offset`` keeps
    gaps (as compacted batches have).
    """

    def __init__(
        self,
        compression: CompressionType | int = CompressionType.NONE,
        *,
        base_offset: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
        compression_level: int | None = None,
    ) -> None:
        self.compression = CompressionType(compression)
        self.base_offset = base_offset
        self.timestamp_type = timestamp_type
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self.compression_level = compression_level
        self._records: list[tuple[int, int, bytes | None, bytes | None, Sequence[Header]]] = []

    def __len__(self) -> int:
        return len(self._records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
        *,
        offset: int | None = None,
    ) -> int:
        """Add a record; returns its absolute offset."""
        if offset is None:
            offset = self.base_offset + (
                self._records[-1][0] - self.base_offset + 1 if self._records else 0
            )
        elif self._records and offset <= self._records[-1][0]:
            raise ValueError(f"offset {offset} is not above the last offset {self._records[-1][0]}")
        self._records.append((offset, timestamp, key, value, tuple(headers)))
        return offset

    def append_control(self, control_type: ControlRecordType, timestamp: int, coordinator_epoch: int = 0) -> int:
        key = struct.pack(">hh", 0, int(control_type))
        value = struct.pack(">hi", 0, coordinator_epoch)
        return self.append(timestamp, key, value)

    def extend(self, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        for ts, key, value in records:
            self.append(ts, key, value)

    def attributes(self) -> int:
        attrs = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_MASK
        if self.is_control:
            attrs |= CONTROL_MASK
        if self.delete_horizon_ms is not None:
            attrs |= DELETE_HORIZON_MASK
        return attrs

    def build(self) -> bytes:
        recs = self._records
        if recs:
            first_ts = recs[0][1]
            max_ts = max(r[1] for r in recs)
            last_delta = recs[-1][0] - self.base_offset
        else:
            first_ts = max_ts = -1
            last_delta = 0  # Kafka writes an empty batch (cleaner) with its own delta
        base_ts = self.delete_horizon_ms if self.delete_horizon_ms is not None else first_ts
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME and self.log_append_time is not None:
            max_ts = self.log_append_time
        body = bytearray()
        for off, ts, key, value, headers in recs:
            encode_record(body, off - self.base_offset, ts - base_ts, key, value, headers)
        payload = compress(self.compression, bytes(body), self.compression_level)
        return assemble_batch(
            base_offset=self.base_offset,
            partition_leader_epoch=self.partition_leader_epoch,
            attributes=self.attributes(),
            last_offset_delta=last_delta,
            base_timestamp=base_ts,
            max_timestamp=max_ts,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            records_count=len(recs),
            payload=payload,
        )


def assemble_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    payload: bytes,
) -> bytes:
    """Header + payload with the CRC computed: the one place a batch's bytes are framed."""
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        buf,
        0,
        base_offset,
        RECORD_BATCH_OVERHEAD - 12 + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    buf[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def build_batch(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    compression: CompressionType | int = CompressionType.NONE,
    **kwargs: object,
) -> bytes:
    """Shortcut: records as (timestamp, key, value) tuples."""
    b = RecordBatchBuilder(compression, **kwargs)  # type: ignore[arg-type]
    b.extend(records)
    return b.build()
