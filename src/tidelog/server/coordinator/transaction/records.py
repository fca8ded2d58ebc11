"""Key/value schemas of ``__transaction_state`` (Kafka's TransactionLog): TransactionLogKey v0
and TransactionLogValue v0 (fixed) / v1 (flexible, tagged PreviousProducerId,
NextProducerId, ClientTransactionVersion). Each is prefixed by its int16 schema version, as
Kafka writes them. A null value is the tombstone of an expired transactional id.

Partitioning is Kafka's ``Utils.abs(transactionalId.hashCode()) %
transaction.state.log.num.partitions`` (the same hash the groups use).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tidelog.protocol.codec import write_uvarint
from tidelog.protocol.field_reader import FieldReader
from tidelog.util.java_hash import java_abs, java_string_hash

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnSchemaError(ValueError):
    """A key or value that is not one of Kafka's transaction log schemas."""


def partition_for(transactional_id: str, num_partitions: int) -> int:
    return java_abs(java_string_hash(transactional_id)) % num_partitions


@dataclass
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    # topic -> partition ids; None only when the record said null
    transaction_partitions: dict[str, list[int]] | None = field(default_factory=dict)
    transaction_last_update_timestamp_ms: int = -1
    transaction_start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    try:
        version, n = struct.unpack_from(">hh", data, 0)
        if version != KEY_VERSION:
            raise TxnSchemaError(f"unknown TransactionLogKey version {version}")
        if n < 0 or 4 + n != len(data):
            raise TxnSchemaError(f"TransactionLogKey string of {n} bytes in {len(data)} bytes")
        return bytes(data[4 : 4 + n]).decode()
    except struct.error as exc:
        raise TxnSchemaError(f"truncated TransactionLogKey: {exc}") from exc


def encode_value(v: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    flexible = version >= 1
    out = bytearray(_I16.pack(version))
    out += struct.pack(">qhib", v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
                       v.transaction_status)
    parts = v.transaction_partitions
    if flexible:
        write_uvarint(out, 0 if parts is None else len(parts) + 1)
    else:
        out += _I32.pack(-1 if parts is None else len(parts))
    for topic, ids in (parts or {}).items():
        raw = topic.encode()
        if flexible:
            write_uvarint(out, len(raw) + 1)
            out += raw
            write_uvarint(out, len(ids) + 1)
        else:
            out += _string(topic) + _I32.pack(len(ids))
        out += b"".join(_I32.pack(p) for p in ids)
        if flexible:
            out.append(0)  # no tagged fields in PartitionsSchema
    out += struct.pack(">qq", v.transaction_last_update_timestamp_ms,
                       v.transaction_start_timestamp_ms)
    if flexible:
        _write_tags(out, v)
    return bytes(out)


def _write_tags(out: bytearray, v: TransactionLogValue) -> None:
    tags = []
    if v.previous_producer_id != -1:
        tags.append((0, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((1, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((2, _I16.pack(v.client_transaction_version)))
    write_uvarint(out, len(tags))
    for tag, raw in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(raw))
        out += raw


class RecordReader(FieldReader):
    error = TxnSchemaError


def decode_value(data: bytes) -> TransactionLogValue:
    try:
        return _decode_value(RecordReader(data))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise TxnSchemaError(f"unreadable TransactionLogValue: {exc}") from exc


def _decode_value(r: RecordReader) -> TransactionLogValue:
    version = r.i16()
    if version not in (0, 1):
        raise TxnSchemaError(f"unknown TransactionLogValue version {version}")
    r.flexible = version == 1
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    status = r.i8()
    n = r.array_len()
    parts: dict[str, list[int]] | None = None if n < 0 else {}
    for _ in range(max(n, 0)):
        topic = r.nullable_string()
        if topic is None:
            raise TxnSchemaError(f"null topic name before byte {r.pos}")
        ids = [r.i32() for _ in range(max(r.array_len(), 0))]
        r.skip_tags()
        assert parts is not None
        parts.setdefault(topic, []).extend(ids)
    value = TransactionLogValue(pid, epoch, timeout, status, parts, r.i64(), r.i64())
    if r.flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            raw = r.take(size)
            if tag == 0:
                value.previous_producer_id = _I64.unpack(raw)[0]
            elif tag == 1:
                value.next_producer_id = _I64.unpack(raw)[0]
            elif tag == 2:
                value.client_transaction_version = _I16.unpack(raw)[0]
    return value


STATE_NAMES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
               4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


def format_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """Kafka's TransactionLogMessageFormatter / dump-log --transaction-log-decoder output:
    ``transaction_metadata::transactionalId=...`` and the value's fields, or ``<DELETE>``."""
    if key is None:
        return "NULL", "NULL"
    try:
        tid = decode_key(key)
    except TxnSchemaError as exc:
        return f"unknown::{exc}", ""
    k = f"transaction_metadata::transactionalId={tid}"
    if value is None:
        return k, "<DELETE>"
    try:
        v = decode_value(value)
    except TxnSchemaError as exc:
        return k, f"unknown::{exc}"
    parts = "" if v.transaction_partitions is None else ",".join(
        f"{t}-{p}" for t, ids in v.transaction_partitions.items() for p in ids)
    return k, (
        f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},"
        f"state={STATE_NAMES.get(v.transaction_status, v.transaction_status)},"
        f"partitions=[{parts}],txnLastUpdateTimestamp={v.transaction_last_update_timestamp_ms},"
        f"txnTimeoutMs={v.transaction_timeout_ms}"
    )
