"""Leader-side batch validation and offset assignment (Kafka's LogValidator), pure over bytes.

The batch is patched in place (base offset, partition leader epoch, max timestamp /
LogAppendTime) and re-encoded only when the topic's ``compression.type`` differs from the
batch's codec or a compressed batch's inner offsets are not 0..n-1. Records are walked once
(a light scan of the length/timestamp/offset/key fields for uncompressed batches) to check
the count, timestamps and, on compacted topics, keys.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from tidelog._native import core as _native_core
from tidelog.config.log_config import LogConfig
from tidelog.records import (
    NO_TIMESTAMP,
    CompressionType,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
)
from tidelog.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    crc32c,
)
from tidelog.records.compression import MAX_DECOMPRESSED_BATCH, codec
from tidelog.records.errors import UnsupportedCompressionError
from tidelog.records.varint import decode_varint

from .errors import (
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
)

Buffer = bytes | bytearray | memoryview
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class AppendOrigin(enum.Enum):
    """Who is appending (Kafka's AppendOrigin): decides which checks apply."""

    REPLICATION = "replication"
    COORDINATOR = "coordinator"
    CLIENT = "client"


_CLIENT = AppendOrigin.CLIENT  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER


@dataclass(slots=True)
class ValidationResult:
    records: bytearray | memoryview  # the bytes to append: the patched or rebuilt batch
    batch: RecordBatch  # a view over ``records``
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int  # "shallow": the last offset of the batch (Kafka 4.0)
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    num_messages: int
    recompressed: bool


@dataclass(slots=True)
class _Scan:
    count: int = 0
    max_timestamp: int = NO_TIMESTAMP
    sequential: bool = True
    errors: list[tuple[int, str]] | None = None
    invalid_timestamp: bool = False


def split_batches(records: Buffer, *, path: str = "records") -> list[RecordBatch]:
    """All batches of a record set over one writable buffer, CRCs not yet checked.

    A trailing partial batch is an error here (a produce request's records must be whole).
    """
    # a writable buffer is patched in place (a view of a large request frame: no copy)
    writable = isinstance(records, bytearray) or (
        isinstance(records, memoryview) and not records.readonly
    )
    buf = records if writable else bytearray(records)
    mv = memoryview(buf)
    out: list[RecordBatch] = []
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
            # Kafka 3.x: a malformed record set is INVALID_RECORD; CORRUPT_MESSAGE (retriable)
            # is kept for CRC mismatches, which a resend can fix.
            raise InvalidRecordError(f"{end - pos} trailing bytes are not a batch ({path})")
        length = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        size = LOG_OVERHEAD + length
        if size < RECORD_BATCH_OVERHEAD or pos + size > end:
            raise InvalidRecordError(
                f"batch length field {length} does not fit the {end - pos} remaining bytes "
                f"({path}, at byte {pos})"
            )
        out.append(RecordBatch(mv[pos : pos + size], pos))
        pos += size
    return out


def validate_and_assign_offsets(
    records: Buffer,
    config: LogConfig,
    *,
    now_ms: int,
    offset: int,
    leader_epoch: int = -1,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    topic_partition: str = "",
) -> ValidationResult:
    """Validate one v2 batch from a producer/coordinator and assign offsets from ``offset``.

    Raises InvalidRecordError, RecordTooLargeError, CorruptRecordError or
    RecordValidationError (cause InvalidRecordError / InvalidTimestampError).
    """
    if origin is _CLIENT and not config.log_append_time and (
            config.compression_type == "producer" or _plain_topic(config)):
        fast = _validate_plain(records, config, now_ms, offset, leader_epoch)
        if fast is not None:
            return fast
    batches = split_batches(records, path=topic_partition or "records")
    if len(batches) != 1:
        raise InvalidRecordError(
            f"Produce requests must contain exactly one record batch, got {len(batches)} "
            f"(topic partition {topic_partition})"
        )
    batch = batches[0]
    header = _check_outer(batch, config, origin, topic_partition)
    attrs, n = header[5], header[12]
    source = codec(attrs & COMPRESSION_MASK)
    target = _target_codec(config, source)
    scan = _scan_records(batch, header, config, now_ms, origin, topic_partition)
    _check_count(n, scan, topic_partition)
    _raise_record_errors(scan)
    rebuild = target != source or not scan.sequential
    buf, batch = _assign_offsets(batch, config, scan, target if rebuild else None,
                                 offset=offset, leader_epoch=leader_epoch, now_ms=now_ms)
    last = offset + n - 1
    lat = now_ms if config.log_append_time else -1
    return ValidationResult(
        records=buf,
        batch=batch,
        first_offset=offset,
        last_offset=last,
        max_timestamp=batch.max_timestamp,
        offset_of_max_timestamp=last,
        log_append_time=lat,
        num_messages=n,
        recompressed=rebuild,
    )


def _plain_topic(config: LogConfig) -> bool:
    """A topic whose codec keeps an uncompressed batch uncompressed."""
    return CompressionType.from_name(config.compression_type) is CompressionType.NONE


def _validate_plain(records: Buffer, config: LogConfig, now_ms: int, offset: int,
                    leader_epoch: int) -> ValidationResult | None:
    """The fast path of one plain client batch (``validate_plain``); None: the batch needs
    the general path (which gives Kafka's error for a bad one)."""
    buf: bytearray | memoryview
    if isinstance(records, bytearray) or (
            isinstance(records, memoryview) and not records.readonly):
        buf = records
    else:
        buf = bytearray(records)
    got = validate_plain(buf, offset, leader_epoch,
                         max(now_ms - config.timestamp_before_max_ms, _INT64_MIN),
                         min(now_ms + config.timestamp_after_max_ms, _INT64_MAX),
                         config.max_message_bytes, config.compact)
    if got is None:
        return None
    n, max_timestamp = got
    last = offset + n - 1
    # (records, batch, first and last offset, max timestamp, its offset, log append time,
    # records, recompressed: positional, as this runs for every plain append)
    return ValidationResult(buf, RecordBatch(buf), offset, last, max_timestamp, last, -1, n,
                            False)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_PLAIN = struct.Struct(">qiiBIhiqqqhii")  # the batch header (RecordBatch.header's layout)


def validate_plain(buf: bytearray | memoryview, offset: int, leader_epoch: int, lo: int,
                   hi: int, max_message_bytes: int, compact: bool) -> tuple[int, int] | None:
    """``_plain`` (the native core's validate_plain or its twin) with the CRCs computed here
    by the crc32c package: (records, max timestamp), or None (declined, ``buf`` as it was)."""
    if len(buf) < RECORD_BATCH_OVERHEAD:
        return None
    with memoryview(buf) as mv:
        got = _plain(buf, crc32c(mv[21:]), offset, leader_epoch, lo, hi, max_message_bytes,
                     compact)
        if got is None:
            return None
        n, max_timestamp, stale = got
        if stale:
            _U32.pack_into(buf, 17, crc32c(mv[21:]))
    return n, max_timestamp


def validate_plain_py(buf: bytearray | memoryview, crc: int, offset: int, leader_epoch: int,
                      lo: int, hi: int, max_message_bytes: int, compact: bool
                      ) -> tuple[int, int, bool] | None:
    """One uncompressed client batch checked and patched as the general path would; None
    (``buf`` untouched) for anything else: not exactly one batch, a non-zero base offset,
    too large, another magic, a bad CRC, attributes other than transactional, a bad offset
    range or count, a sequence missing, a malformed record, offset deltas not 0..n-1, a
    timestamp outside [lo, hi], a null key on a compacted topic. ``crc``: the CRC-32C of
    ``buf[21:]``, computed by the caller. Returns (records, max timestamp, whether the CRC
    is stale) once the base offset, leader epoch and max timestamp are set; the caller
    writes the CRC of a stale one."""
    got = plain_check_py(buf, crc, lo, hi, max_message_bytes, compact)
    if got is None:
        return None
    recs, top = got
    _Q.pack_into(buf, 0, offset)
    _I32.pack_into(buf, 12, leader_epoch)
    if _Q.unpack_from(buf, 35)[0] != top:
        _Q.pack_into(buf, 35, top)
        return recs, top, True
    return recs, top, False


def plain_check_py(buf: Buffer, crc: int, lo: int, hi: int, max_message_bytes: int,
                   compact: bool) -> tuple[int, int] | None:
    """``validate_plain_py``'s checks, nothing written: (records, max timestamp) or None."""
    n = len(buf)
    if n < RECORD_BATCH_OVERHEAD:
        return None
    (base, length, _epoch, magic, stored, attrs, lod, base_ts, _max_ts, pid, _pe, base_seq,
     count) = _PLAIN.unpack_from(buf, 0)
    if length + LOG_OVERHEAD != n or base != 0 or n > max_message_bytes or magic != MAGIC_V2:
        return None
    if crc != stored or attrs & ~TRANSACTIONAL_MASK & 0xFFFF:
        return None
    if lod + 1 <= 0 or count <= 0 or lod + 1 != count or (pid > NO_PRODUCER_ID and base_seq < 0):
        return None
    try:
        recs, min_d, max_d, sequential, nulls = _walk_py(memoryview(buf)[RECORD_BATCH_OVERHEAD:],
                                                         count)
    except InvalidRecordError:
        return None
    top = base_ts + max_d
    if not sequential or (compact and nulls) or base_ts + min_d < lo or top > hi or \
            top > _INT64_MAX:
        return None
    return recs, top


def _assign_offsets(batch: RecordBatch, config: LogConfig, scan: _Scan,
                    rebuild_as: CompressionType | None, *, offset: int, leader_epoch: int,
                    now_ms: int) -> tuple[bytearray | memoryview, RecordBatch]:
    """Patch base offset, epoch and timestamps in place, or re-encode as ``rebuild_as``."""
    buf: bytearray | memoryview
    if rebuild_as is not None:
        buf = _rebuild(batch, config, rebuild_as, offset, leader_epoch, now_ms)
        out = RecordBatch(memoryview(buf))
        if out.size_in_bytes > config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size after recompression is {out.size_in_bytes} bytes, "
                f"larger than max.message.bytes {config.max_message_bytes}"
            )
        return buf, out
    # the single batch spans the whole (writable) buffer split_batches made or was given
    obj = batch.buf.obj
    out = batch  # the batch is a writable view of the whole buffer: patched as it is
    if isinstance(obj, bytearray) and len(obj) == batch.buf.nbytes:
        buf = obj
    elif not batch.buf.readonly:
        buf = batch.buf  # a view of a larger writable buffer (a request frame)
    else:
        buf = bytearray(batch.buf)
        out = RecordBatch(memoryview(buf))
    out.set_base_offset(offset)
    out.set_partition_leader_epoch(leader_epoch)
    if config.log_append_time:
        out.set_log_append_time(now_ms)
    else:
        out.set_max_timestamp(TimestampType.CREATE_TIME, scan.max_timestamp)
    return buf, out


def _check_outer(
    batch: RecordBatch, config: LogConfig, origin: AppendOrigin, tp: str
) -> tuple[int, ...]:
    """Kafka's analyzeAndValidateRecords + validateBatch header checks, in Kafka's order.
    Returns the header's fields (RecordBatch.header)."""
    # one unpack of the header (split_batches made sure it is whole): a batch per append
    header = batch.header()
    base_offset, _, _, magic, _, attrs, lod, _, _, pid, _, base_seq, count = header
    size = batch.size_in_bytes
    if origin is AppendOrigin.CLIENT and base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {tp} should be 0, "
            f"but it is {base_offset}"
        )
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {tp} is {size} bytes "
            f"which exceeds the maximum configured value of {config.max_message_bytes}."
        )
    if magic != MAGIC_V2:
        raise InvalidRecordError(
            f"Produce requests are only allowed to contain record batches with magic version "
            f"2, got magic {magic} in {tp}"
        )
    batch.ensure_valid(tp or None)
    if origin is not AppendOrigin.CLIENT:
        return header
    if lod + 1 <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [0, {lod}] in topic partition {tp}."
        )
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count} in {tp}.")
    if lod + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [0, {lod}] and count of records {count} in {tp}."
        )
    if attrs & CONTROL_MASK:
        raise InvalidRecordError(
            f"Clients are not allowed to write control records in topic partition {tp}."
        )
    if pid > NO_PRODUCER_ID and base_seq < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {base_seq} in record batch with producerId "
            f"{pid} in topic partition {tp}."
        )
    return header


def _target_codec(config: LogConfig, source: CompressionType) -> CompressionType:
    if config.compression_type == "producer":
        return source
    return CompressionType.from_name(config.compression_type)


def _scan_records(
    batch: RecordBatch, header: tuple[int, ...], config: LogConfig, now_ms: int,
    origin: AppendOrigin, tp: str = "",
) -> _Scan:
    """Walk every record once (fast walk); list per-record errors only if there are any.
    ``header``: the batch's fields (RecordBatch.header)."""
    scan = _Scan()
    lat_topic = config.log_append_time
    attrs, base_ts, max_ts, count = header[5], header[7], header[8], header[12]
    lat_batch = bool(attrs & TIMESTAMP_TYPE_MASK)  # the batch says LogAppendTime
    if lat_topic and lat_batch and origin is AppendOrigin.CLIENT:
        _add_error(scan, 0, "Invalid timestamp type in message: producers must not set "
                   "timestamp type to LogAppendTime.", ts=True)
    payload = _payload(batch)
    n, min_d, max_d, sequential, null_keys = _walk(payload, count)
    scan.count, scan.sequential = n, sequential
    if lat_batch:
        min_ts = scan.max_timestamp = max_ts
    else:
        min_ts = base_ts + min_d if n else NO_TIMESTAMP
        scan.max_timestamp = base_ts + max_d if n else NO_TIMESTAMP
    check_keys = config.compact and not attrs & CONTROL_MASK and null_keys > 0
    lo = now_ms - config.timestamp_before_max_ms
    hi = now_ms + config.timestamp_after_max_ms
    check_ts = origin is not AppendOrigin.REPLICATION and not lat_topic and n > 0 and (
        min_ts < lo or scan.max_timestamp > hi)
    if check_keys or check_ts:
        _list_record_errors(batch, scan, check_keys, check_ts, lo, hi, tp)
    return scan


def _payload(batch: RecordBatch) -> Buffer:
    """The batch's records, decompressed within MAX_DECOMPRESSED_BATCH: a batch that inflates
    beyond it (a decompression bomb) is INVALID_RECORD, found without holding more."""
    try:
        return batch.records_payload(MAX_DECOMPRESSED_BATCH)
    except UnsupportedCompressionError as exc:
        raise InvalidRecordError(f"{exc} in batch at byte {batch.position}") from None


def _list_record_errors(batch: RecordBatch, scan: _Scan, check_keys: bool, check_ts: bool,
                        lo: int, hi: int, tp: str) -> None:
    """The slow path: decode every record to name each offending index (Kafka lists all)."""
    lat = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    for index, rec in enumerate(batch.iter_records(MAX_DECOMPRESSED_BATCH)):
        ts = batch.max_timestamp if lat else rec.timestamp
        if check_keys and rec.key is None:
            # Kafka's LogValidator.validateKey, word for word
            _add_error(scan, index, "Compacted topic cannot accept message without key in "
                       f"topic partition {tp}")
        if check_ts and ts != NO_TIMESTAMP and not lo <= ts <= hi:
            _add_error(scan, index, f"Timestamp {ts} of message with offset {index} is out of "
                       f"range. The timestamp should be within [{lo}, {hi}]", ts=True)


def _add_error(scan: _Scan, index: int, msg: str, *, ts: bool = False) -> None:
    if scan.errors is None:
        scan.errors = []
    scan.errors.append((index, msg))
    scan.invalid_timestamp = scan.invalid_timestamp or ts


_BIG = 1 << 62


def _walk_py(buf: Buffer, count: int) -> tuple[int, int, int, bool, int]:
    """(records, min ts delta, max ts delta, offset deltas are 0..n-1, null keys) of the
    ``count`` records of ``buf`` (the native ``walk``: ``core_walk`` over ``walk_loop``)."""
    walked = _walk_loop_py(buf)
    if walked[0] != count:
        raise InvalidRecordError(f"the batch declares {count} records but holds {walked[0]}")
    return walked


def _walk_loop_py(buf: Buffer) -> tuple[int, int, int, bool, int]:
    """``_walk_py``'s records, however many ``buf`` holds (the native ``walk_loop``). The
    produce path's hot loop: only each record's length, timestamp delta, offset delta and key
    length are decoded, 1- and 2-byte varints inline, no helper call per record or varint."""
    pos, end, n = 0, len(buf), 0
    min_d, max_d, sequential, nulls = _BIG, -_BIG, True, 0
    try:
        while pos < end:
            # each varint: 1- and 2-byte forms inline, longer ones through decode_varint
            b = buf[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | (buf[pos + 1] << 7)
                length, p = (v >> 1) ^ -(v & 1), pos + 2
            else:
                length, p = decode_varint(buf, pos)
            rec_end = p + length
            if length <= 0 or rec_end > end:
                raise InvalidRecordError(f"record {n} length {length} runs past the batch")
            p += 1  # attributes
            b = buf[p]
            if b < 0x80:
                d, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                v = (b & 0x7F) | (buf[p + 1] << 7)
                d, p = (v >> 1) ^ -(v & 1), p + 2
            else:
                d, p = decode_varint(buf, p)
            if d < min_d:
                min_d = d
            if d > max_d:
                max_d = d
            b = buf[p]
            if b < 0x80:
                od, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                v = (b & 0x7F) | (buf[p + 1] << 7)
                od, p = (v >> 1) ^ -(v & 1), p + 2
            else:
                od, p = decode_varint(buf, p)
            if od != n:
                sequential = False
            if buf[p] == 1:  # key length -1 is the single byte 0x01
                nulls += 1
            pos = rec_end
            n += 1
    except IndexError:
        raise InvalidRecordError(f"record {n} header runs past the batch") from None
    return n, min_d, max_d, sequential, nulls


# The native twins (tidelog._native) when built and not switched off: same results, same
# errors (validate_plain: the same acceptance and the same patched bytes).
_walk = _native_core.walk if _native_core is not None else _walk_py
_plain = _native_core.validate_plain if _native_core is not None else validate_plain_py


def _check_count(count: int, scan: _Scan, tp: str) -> None:
    if scan.count != count:
        raise InvalidRecordError(
            f"Record count {scan.count} does not match the batch count {count} in {tp}"
        )


def _raise_record_errors(scan: _Scan) -> None:
    errs = scan.errors
    if not errs:
        return
    shown = "; ".join(f"record {i}: {m}" for i, m in errs[:3])
    if scan.invalid_timestamp:
        cause: InvalidRecordError | InvalidTimestampError = InvalidTimestampError(
            f"One or more records have been rejected due to invalid timestamp ({shown})"
        )
    else:
        # Kafka's LogValidator.processRecordErrors, with RecordError's toString
        listed = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errs[:3])
        cause = InvalidRecordError(
            f"One or more records have been rejected due to {len(errs)} record errors in "
            f"total, and only showing the first three errors at most: [{listed}]"
        )
    raise RecordValidationError(errs, cause)


def _level(config: LogConfig, codec: CompressionType) -> int | None:
    return {
        CompressionType.GZIP: None if config.compression_gzip_level == -1
        else config.compression_gzip_level,
        CompressionType.LZ4: config.compression_lz4_level,
        CompressionType.ZSTD: config.compression_zstd_level,
    }.get(codec)


def _rebuild(
    batch: RecordBatch,
    config: LogConfig,
    target: CompressionType,
    offset: int,
    leader_epoch: int,
    now_ms: int,
) -> bytearray:
    """Re-encode with the topic codec and sequential offsets (Kafka's buildRecordsAndAssign...)."""
    lat = config.log_append_time
    builder = RecordBatchBuilder(
        target,
        base_offset=offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        log_append_time=now_ms if lat else None,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=leader_epoch,
        compression_level=_level(config, target),
    )
    for rec in batch.iter_records(MAX_DECOMPRESSED_BATCH):
        builder.append(rec.timestamp, rec.key, rec.value, rec.headers)
    return bytearray(builder.build())


# -- follower side -----------------------------------------------------------------------------
@dataclass(slots=True)
class FollowerAnalysis:
    batches: list[RecordBatch]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    num_messages: int
    valid_bytes: int


def analyze_follower_records(records: Buffer, *, path: str = "records") -> FollowerAnalysis:
    """CRC-check replicated batches and require strictly increasing offsets (no rewrite)."""
    batches = split_batches(records, path=path)
    last, max_ts, off_max, n = -1, NO_TIMESTAMP, -1, 0
    for b in batches:
        b.ensure_valid(path)
        if b.base_offset <= last or b.last_offset < b.base_offset:
            raise OffsetsOutOfOrderError(
                f"Out of order offsets found in append to {path}: batch [{b.base_offset}, "
                f"{b.last_offset}] after offset {last}"
            )
        last = b.last_offset
        if b.max_timestamp > max_ts:
            max_ts, off_max = b.max_timestamp, b.last_offset
        n += b.last_offset_delta + 1
    first = batches[0].base_offset if batches else -1
    return FollowerAnalysis(
        batches=batches,
        first_offset=first,
        last_offset=last,
        max_timestamp=max_ts,
        offset_of_max_timestamp=off_max if batches else -1,
        num_messages=n,
        valid_bytes=sum(b.size_in_bytes for b in batches),
    )
