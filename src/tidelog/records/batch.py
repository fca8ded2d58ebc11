"""RecordBatch v2 (magic 2): a zero-copy view over the 61-byte header and its records.

The wire format is the disk format. Header layout (big-endian), offsets into the batch:
baseOffset 0 q, batchLength 8 i, partitionLeaderEpoch 12 i, magic 16 b, crc 17 I,
attributes 21 h, lastOffsetDelta 23 i, baseTimestamp 27 q, maxTimestamp 35 q,
producerId 43 q, producerEpoch 51 h, baseSequence 53 i, recordsCount 57 i, records 61.
The CRC-32C covers bytes [21, end); baseOffset and partitionLeaderEpoch are outside it.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from tidelog.util.crc import load_crc32c

from .compression import DEFAULT_MAX_DECOMPRESSED, CompressionType, codec, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .varint import decode_varint

Buffer = bytes | bytearray | memoryview

RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE_UP_TO_MAGIC = 17
MIN_LENGTH_FIELD = 14  # Kafka's file-level check: v0 record overhead
MAGIC_V2 = 2
CRC_START = 21

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_H = struct.Struct(">h")


MAGIC_OFFSET = 16  # baseOffset, batchLength, partitionLeaderEpoch, then magic
ATTRIBUTES_OFFSET = 21  # int16 after the CRC


def peek_magic(buf: Buffer) -> int:
    """The first batch's magic byte without parsing it; -1 when ``buf`` is too short."""
    return buf[MAGIC_OFFSET] if len(buf) > MAGIC_OFFSET else -1


def peek_attributes(buf: Buffer) -> int:
    """The first batch's attributes (v2) without parsing it; 0 when ``buf`` is too short.
    The hot paths' one look at a batch: its codec, whether it is transactional."""
    if len(buf) < ATTRIBUTES_OFFSET + 2:
        return 0
    return int(_H.unpack_from(buf, ATTRIBUTES_OFFSET)[0])


crc32c = load_crc32c()  # crc32c(data) -> int


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(slots=True)
class Record:
    """One decoded record with absolute offset, timestamp and sequence."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    sequence: int = NO_SEQUENCE
    attributes: int = 0
    size: int = 0  # encoded size including the length varint


@dataclass(slots=True, frozen=True)
class EndTransactionMarker:
    control_type: ControlRecordType
    coordinator_epoch: int


def parse_control_key(key: bytes | None) -> ControlRecordType:
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, ctype = struct.unpack_from(">hh", key)
    if version < 0:
        raise InvalidRecordError(f"negative control record key version {version}")
    try:
        return ControlRecordType(ctype)
    except ValueError:
        return ControlRecordType.UNKNOWN


def parse_end_txn_marker(record: Record) -> EndTransactionMarker:
    ctype = parse_control_key(record.key)
    if ctype not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"not an end-transaction marker: {ctype.name}")
    if record.value is None or len(record.value) < 6:
        raise InvalidRecordError("end-transaction marker value shorter than 6 bytes")
    _version, coordinator_epoch = struct.unpack_from(">hi", record.value)
    return EndTransactionMarker(ctype, coordinator_epoch)


class RecordBatch:
    """A view over one complete v2 batch; ``buf`` must hold exactly the batch's bytes.

    Reading fields never copies. Patching requires a writable buffer (bytearray or a
    memoryview of one).
    """

    __slots__ = ("buf", "position")

    def __init__(self, buf: Buffer, position: int = 0) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.position = position  # byte position of the batch in its file/buffer (informational)

    # -- header fields -------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        value: int = _Q.unpack_from(self.buf, 0)[0]
        return value

    @property
    def batch_length(self) -> int:
        value: int = _I32.unpack_from(self.buf, 8)[0]
        return value

    @property
    def size_in_bytes(self) -> int:
        return len(self.buf)

    @property
    def partition_leader_epoch(self) -> int:
        value: int = _I32.unpack_from(self.buf, 12)[0]
        return value

    @property
    def magic(self) -> int:
        return self.buf[16]

    @property
    def crc(self) -> int:
        value: int = _U32.unpack_from(self.buf, 17)[0]
        return value

    @property
    def attributes(self) -> int:
        value: int = _H.unpack_from(self.buf, 21)[0]
        return value

    @property
    def last_offset_delta(self) -> int:
        value: int = _I32.unpack_from(self.buf, 23)[0]
        return value

    @property
    def base_timestamp(self) -> int:
        value: int = _Q.unpack_from(self.buf, 27)[0]
        return value

    @property
    def max_timestamp(self) -> int:
        value: int = _Q.unpack_from(self.buf, 35)[0]
        return value

    @property
    def producer_id(self) -> int:
        value: int = _Q.unpack_from(self.buf, 43)[0]
        return value

    @property
    def producer_epoch(self) -> int:
        value: int = _H.unpack_from(self.buf, 51)[0]
        return value

    @property
    def base_sequence(self) -> int:
        value: int = _I32.unpack_from(self.buf, 53)[0]
        return value

    @property
    def records_count(self) -> int:
        value: int = _I32.unpack_from(self.buf, 57)[0]
        return value

    # -- derived -------------------------------------------------------------------------------
    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> CompressionType:
        return codec(self.attributes & COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) & 0x7FFFFFFF

    def header(self) -> tuple[int, ...]:
        """All header fields at once (one struct call): for hot loops."""
        return _HEADER.unpack_from(self.buf, 0)

    # -- integrity -----------------------------------------------------------------------------
    def compute_crc(self) -> int:
        return crc32c(self.buf[CRC_START:])

    def is_valid(self) -> bool:
        return len(self.buf) >= RECORD_BATCH_OVERHEAD and self.magic == MAGIC_V2 and (
            self.crc == self.compute_crc()
        )

    def ensure_valid(self, path: str | None = None) -> None:
        if len(self.buf) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"batch size {len(self.buf)} is below the minimum {RECORD_BATCH_OVERHEAD}",
                self.position,
                path,
            )
        if self.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {self.magic}", self.position, path)
        stored, computed = self.crc, self.compute_crc()
        if stored != computed:
            raise CorruptRecordError(
                f"CRC mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}",
                self.position,
                path,
            )

    # -- in-place patching (writable buffers only) ---------------------------------------------
    def set_base_offset(self, offset: int) -> None:
        """Outside the CRC: no recomputation."""
        _Q.pack_into(self.buf, 0, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Outside the CRC: no recomputation."""
        _I32.pack_into(self.buf, 12, epoch)

    def set_log_append_time(self, timestamp: int) -> None:
        """Set the LogAppendTime type bit and maxTimestamp; both are covered, so re-CRC."""
        attrs = self.attributes | TIMESTAMP_TYPE_MASK
        changed = attrs != self.attributes or timestamp != self.max_timestamp
        if not changed:
            return
        _H.pack_into(self.buf, 21, attrs)
        _Q.pack_into(self.buf, 35, timestamp)
        self._update_crc()

    def set_max_timestamp(self, timestamp_type: TimestampType, timestamp: int) -> None:
        old = _H.unpack_from(self.buf, 21)[0]  # (once: every append patches its batch)
        attrs = old & ~TIMESTAMP_TYPE_MASK
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if attrs == old and timestamp == _Q.unpack_from(self.buf, 35)[0]:
            return
        _H.pack_into(self.buf, 21, attrs)
        _Q.pack_into(self.buf, 35, timestamp)
        self._update_crc()

    def _update_crc(self) -> None:
        _U32.pack_into(self.buf, 17, self.compute_crc())

    # -- records -------------------------------------------------------------------------------
    def records_payload(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> Buffer:
        """The (decompressed) bytes holding the records."""
        body = self.buf[RECORD_BATCH_OVERHEAD:]
        c = self.attributes & COMPRESSION_MASK
        if c == 0:
            return body
        return decompress(c, bytes(body), max_size)

    def __iter__(self) -> Iterator[Record]:
        return self.iter_records()

    def iter_records(self, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
        """Decode every record; raises InvalidRecordError on malformed records or count."""
        (base_offset, _l, _e, _m, _c, attrs, _lod, base_ts, max_ts, _pid, _pe, base_seq,
         count) = _HEADER.unpack_from(self.buf, 0)
        if count < 0:
            raise InvalidRecordError(f"negative record count {count}")
        log_append = bool(attrs & TIMESTAMP_TYPE_MASK)
        # bytes index faster than a memoryview in the per-record loop; one copy is cheaper.
        payload = bytes(self.records_payload(max_size))
        pos = 0
        for _ in range(count):
            rec, pos = _decode_record(payload, pos, base_offset, base_ts, base_seq)
            if log_append:
                rec.timestamp = max_ts
            yield rec
        if pos != len(payload):
            raise InvalidRecordError(
                f"{len(payload) - pos} bytes left after the {count} records the batch declares"
            )

    def control_type(self) -> ControlRecordType | None:
        """The type of the first control record (control batches only)."""
        if not self.is_control:
            return None
        for rec in self.iter_records():
            return parse_control_key(rec.key)
        return None

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={self.size_in_bytes}, "
            f"codec={self.compression.label}, position={self.position})"
        )


def _varint(buf: Buffer, pos: int) -> tuple[int, int]:
    # Fast path: most varints in a record (attributes aside) fit one byte.
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return decode_varint(buf, pos)


def _decode_record(
    buf: Buffer, pos: int, base_offset: int, base_ts: int, base_seq: int
) -> tuple[Record, int]:
    start = pos
    try:
        length, pos = _varint(buf, pos)
        end = pos + length
        if length < 0 or end > len(buf):
            raise InvalidRecordError(f"record length {length} runs past the batch")
        attributes = buf[pos]
        ts_delta, pos = _varint(buf, pos + 1)
        off_delta, pos = _varint(buf, pos)
        key, pos = _read_bytes(buf, pos, end)
        value, pos = _read_bytes(buf, pos, end)
        n_headers, pos = _varint(buf, pos)
        headers: list[tuple[str, bytes | None]] = []
        if n_headers:
            pos = _read_headers(buf, pos, end, n_headers, headers)
    except IndexError:
        raise InvalidRecordError("record runs past the end of the batch") from None
    if pos != end:
        raise InvalidRecordError(f"record declares {length} bytes but holds {pos - start}")
    seq = NO_SEQUENCE if base_seq < 0 else (base_seq + off_delta) & 0x7FFFFFFF
    rec = Record(
        base_offset + off_delta, base_ts + ts_delta, key, value, headers, seq, attributes,
        end - start,
    )
    return rec, pos


def _read_headers(
    buf: Buffer, pos: int, end: int, n: int, out: list[tuple[str, bytes | None]]
) -> int:
    if n < 0 or n > end - pos:
        raise InvalidRecordError(f"invalid header count {n}")
    for _ in range(n):
        hkey, pos = _read_bytes(buf, pos, end)
        if hkey is None:
            raise InvalidRecordError("null header key")
        hval, pos = _read_bytes(buf, pos, end)
        out.append((hkey.decode("utf-8", "replace"), hval))
    return pos


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise InvalidRecordError(f"field of {n} bytes runs past the record")
    return bytes(buf[pos : pos + n]), pos + n


def iter_batches(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    path: str | None = None,
    validate: bool = True,
) -> Iterator[RecordBatch]:
    """Consecutive batches of ``buf[start:end]`` (FileLogInputStream's rules).

    A partial trailing batch ends the iteration quietly; a length field below the minimum,
    a bad magic or (with ``validate``) a bad CRC raise CorruptRecordError naming the position.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    limit = len(mv) if end is None else min(end, len(mv))
    for pos, size in _frames(mv, start, limit, path):
        batch = RecordBatch(mv[pos : pos + size], pos)
        if validate:
            batch.ensure_valid(path)
        elif batch.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {batch.magic}", pos, path)
        yield batch


def batch_views(buf: Buffer, path: str | None = None) -> list[memoryview]:
    """``iter_batches(buf, validate=False)`` as views of each batch's bytes, without an
    object per batch (for walks that read a few header fields themselves)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    out: list[memoryview] = []
    for pos, size in _frames(mv, 0, len(mv), path):
        if mv[pos + MAGIC_OFFSET] != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {mv[pos + MAGIC_OFFSET]}", pos, path)
        out.append(mv[pos : pos + size])
    return out


def _frames(mv: memoryview, pos: int, limit: int, path: str | None) -> Iterator[tuple[int, int]]:
    """(position, size) of each whole batch from ``pos`` to ``limit``: a partial trailing
    batch ends them quietly, a length field below the minimum raises."""
    while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
        (length,) = _I32.unpack_from(mv, pos + 8)
        if length < MIN_LENGTH_FIELD:
            raise CorruptRecordError(
                f"batch length field {length} is below the minimum {MIN_LENGTH_FIELD}",
                pos,
                path,
            )
        size = LOG_OVERHEAD + length
        if pos + size > limit:
            return
        yield pos, size
        pos += size
