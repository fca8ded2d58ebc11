"""Kafka's wire format of ``__remote_log_metadata`` record values.

Kafka's ``RemoteLogMetadataSerde`` over ``BytesApiMessageSerde``: unsigned varints of the
frame version (1), the apiKey and the message version (0), then the flexible-version
message of ``storage/src/main/resources/message/`` (KIP-482 encoding: compact strings,
arrays and bytes as unsigned varint length + 1, 16-byte uuids, a tagged-field section after
every structure):

=======  =========================================  ===================================
apiKey   message                                    object
=======  =========================================  ===================================
0        RemoteLogSegmentMetadataRecord             RemoteLogSegmentMetadata
1        RemoteLogSegmentMetadataUpdateRecord       RemoteLogSegmentMetadataUpdate
2        RemotePartitionDeleteMetadataRecord        RemotePartitionDeleteMetadata
3        RemoteLogSegmentMetadataSnapshotRecord     RemoteLogSegmentMetadataSnapshot
=======  =========================================  ===================================

``txn_index_empty`` (KIP-1058) travels as the tagged field 0 (bool) of records 0 and 3, written
only when true, as Kafka writes a tagged field at its default; records from a Kafka without
that field read as False. Unknown tagged fields are skipped.

Hand-written: these are Kafka's internal metadata records, not protocol requests, so the
protocol library (kio) has no classes for them; and storage does not import the protocol
layer.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from .metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)

FRAME_VERSION = 1
SEGMENT_METADATA_API_KEY = 0
SEGMENT_METADATA_UPDATE_API_KEY = 1
PARTITION_DELETE_API_KEY = 2
SEGMENT_METADATA_SNAPSHOT_API_KEY = 3
_TXN_INDEX_EMPTY_TAG = 0

_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RemoteLogMetadataSerdeError(ValueError):
    """A record value that is not one of Kafka's remote log metadata messages (the message
    says what and at which byte)."""


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def uvarint(self, v: int) -> None:
        while v & ~0x7F:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def i8(self, v: int) -> None:
        self.out += _I8.pack(v)

    def i32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def string(self, v: str) -> None:
        raw = v.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.out += raw

    def nullable_bytes(self, v: bytes | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        self.uvarint(len(v) + 1)
        self.out += v

    def no_tags(self) -> None:
        self.uvarint(0)

    def topic_id_partition(self, tip: TopicIdPartition) -> None:
        self.string(tip.topic)
        self.uuid(tip.topic_id)
        self.i32(tip.partition)
        self.no_tags()

    def segment_id(self, sid: RemoteLogSegmentId) -> None:
        self.topic_id_partition(sid.topic_id_partition)
        self.uuid(sid.id)
        self.no_tags()

    def leader_epochs(self, epochs: dict[int, int]) -> None:
        self.uvarint(len(epochs) + 1)
        for epoch, offset in sorted(epochs.items()):
            self.i32(epoch)
            self.i64(offset)
            self.no_tags()

    def txn_index_empty_tag(self, txn_index_empty: bool) -> None:
        if not txn_index_empty:
            self.no_tags()
            return
        self.uvarint(1)  # one tagged field
        self.uvarint(_TXN_INDEX_EMPTY_TAG)
        self.uvarint(1)  # its size
        self.i8(1)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def fail(self, what: str) -> RemoteLogMetadataSerdeError:
        return RemoteLogMetadataSerdeError(f"{what} at byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail(f"field of {n} bytes runs past the end ({len(self.buf)} bytes)")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise self.fail("unsigned varint longer than 5 bytes")

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise self.fail("null string in a non-nullable field")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"string is not UTF-8 ({e.reason})") from e

    def nullable_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n)

    def tags(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def topic_id_partition(self) -> TopicIdPartition:
        topic = self.string()
        topic_id = self.uuid()
        partition = self.i32()
        self.tags()
        return TopicIdPartition(topic_id, topic, partition)

    def segment_id(self) -> RemoteLogSegmentId:
        tip = self.topic_id_partition()
        sid = self.uuid()
        self.tags()
        return RemoteLogSegmentId(tip, sid)

    def leader_epochs(self) -> dict[int, int]:
        n = self.uvarint() - 1
        if n < 0:
            raise self.fail("null SegmentLeaderEpochs")
        epochs: dict[int, int] = {}
        for _ in range(n):
            epoch = self.i32()
            epochs[epoch] = self.i64()
            self.tags()
        return epochs

    def segment_state(self) -> RemoteLogSegmentState:
        state = self.i8()
        try:
            return RemoteLogSegmentState(state)
        except ValueError:
            raise self.fail(f"unknown RemoteLogSegmentState {state}") from None

    def txn_index_empty(self) -> bool:
        raw = self.tags().get(_TXN_INDEX_EMPTY_TAG)
        return bool(raw and raw[0])


def _write_segment(w: _Writer, m: RemoteLogSegmentMetadata) -> None:
    w.segment_id(m.remote_log_segment_id)
    w.i64(m.start_offset)
    w.i64(m.end_offset)
    w.i32(m.broker_id)
    w.i64(m.max_timestamp_ms)
    w.i64(m.event_timestamp_ms)
    w.leader_epochs(m.segment_leader_epochs)
    w.i32(m.segment_size_in_bytes)
    w.nullable_bytes(m.custom_metadata)
    w.i8(int(m.state))
    w.txn_index_empty_tag(m.txn_index_empty)


def _read_segment(r: _Reader) -> RemoteLogSegmentMetadata:
    sid = r.segment_id()
    start, end, broker, max_ts, event_ts = r.i64(), r.i64(), r.i32(), r.i64(), r.i64()
    epochs = r.leader_epochs()
    size = r.i32()
    custom = r.nullable_bytes()
    state = r.segment_state()
    txn_empty = r.txn_index_empty()
    try:
        return RemoteLogSegmentMetadata(sid, start, end, max_ts, broker, event_ts, epochs, size,
                                        custom, state, txn_empty)
    except ValueError as e:
        raise r.fail(f"invalid RemoteLogSegmentMetadataRecord: {e}") from e


def _write_update(w: _Writer, u: RemoteLogSegmentMetadataUpdate) -> None:
    w.segment_id(u.remote_log_segment_id)
    w.i32(u.broker_id)
    w.i64(u.event_timestamp_ms)
    w.nullable_bytes(u.custom_metadata)
    w.i8(int(u.state))
    w.no_tags()


def _read_update(r: _Reader) -> RemoteLogSegmentMetadataUpdate:
    sid = r.segment_id()
    broker, event_ts = r.i32(), r.i64()
    custom = r.nullable_bytes()
    state = r.segment_state()
    r.tags()
    try:
        return RemoteLogSegmentMetadataUpdate(sid, event_ts, custom, state, broker)
    except ValueError as e:
        raise r.fail(f"invalid RemoteLogSegmentMetadataUpdateRecord: {e}") from e


def _write_delete(w: _Writer, d: RemotePartitionDeleteMetadata) -> None:
    w.topic_id_partition(d.topic_id_partition)
    w.i32(d.broker_id)
    w.i64(d.event_timestamp_ms)
    w.i8(int(d.state))
    w.no_tags()


def _read_delete(r: _Reader) -> RemotePartitionDeleteMetadata:
    tip = r.topic_id_partition()
    broker, event_ts, raw_state = r.i32(), r.i64(), r.i8()
    try:
        state = RemotePartitionDeleteState(raw_state)
    except ValueError:
        raise r.fail(f"unknown RemotePartitionDeleteState {raw_state}") from None
    r.tags()
    return RemotePartitionDeleteMetadata(tip, state, event_ts, broker)


def _write_snapshot(w: _Writer, s: RemoteLogSegmentMetadataSnapshot) -> None:
    w.uuid(s.segment_id)
    w.i64(s.start_offset)
    w.i64(s.end_offset)
    w.i32(s.broker_id)
    w.i64(s.max_timestamp_ms)
    w.i64(s.event_timestamp_ms)
    w.leader_epochs(s.segment_leader_epochs)
    w.i32(s.segment_size_in_bytes)
    w.nullable_bytes(s.custom_metadata)
    w.i8(int(s.state))
    w.txn_index_empty_tag(s.txn_index_empty)


def _read_snapshot(r: _Reader) -> RemoteLogSegmentMetadataSnapshot:
    sid = r.uuid()
    start, end, broker, max_ts, event_ts = r.i64(), r.i64(), r.i32(), r.i64(), r.i64()
    epochs = r.leader_epochs()
    size = r.i32()
    custom = r.nullable_bytes()
    state = r.segment_state()
    return RemoteLogSegmentMetadataSnapshot(sid, start, end, max_ts, broker, event_ts, epochs,
                                            size, custom, state, r.txn_index_empty())


_READERS: dict[int, Callable[[_Reader], RemoteLogMetadata]] = {
    SEGMENT_METADATA_API_KEY: _read_segment,
    SEGMENT_METADATA_UPDATE_API_KEY: _read_update,
    PARTITION_DELETE_API_KEY: _read_delete,
    SEGMENT_METADATA_SNAPSHOT_API_KEY: _read_snapshot,
}


def serialize(obj: RemoteLogMetadata) -> bytes:
    """The record value Kafka writes for ``obj``."""
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    if isinstance(obj, RemoteLogSegmentMetadata):
        w.uvarint(SEGMENT_METADATA_API_KEY)
        w.uvarint(0)
        _write_segment(w, obj)
    elif isinstance(obj, RemoteLogSegmentMetadataUpdate):
        w.uvarint(SEGMENT_METADATA_UPDATE_API_KEY)
        w.uvarint(0)
        _write_update(w, obj)
    elif isinstance(obj, RemotePartitionDeleteMetadata):
        w.uvarint(PARTITION_DELETE_API_KEY)
        w.uvarint(0)
        _write_delete(w, obj)
    elif isinstance(obj, RemoteLogSegmentMetadataSnapshot):
        w.uvarint(SEGMENT_METADATA_SNAPSHOT_API_KEY)
        w.uvarint(0)
        _write_snapshot(w, obj)
    else:
        raise TypeError(f"not remote log metadata: {type(obj).__name__}")
    return bytes(w.out)


def deserialize(data: bytes) -> RemoteLogMetadata:
    """The object of a record value; :class:`RemoteLogMetadataSerdeError` on bad input
    (an unknown frame version, apiKey or message version, a truncated or oversized value)."""
    r = _Reader(data)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise r.fail(f"unknown frame version {frame} (only {FRAME_VERSION} is supported)")
    api_key = r.uvarint()
    reader = _READERS.get(api_key)
    if reader is None:
        raise r.fail(f"unknown apiKey {api_key} for remote log metadata")
    version = r.uvarint()
    if version != 0:
        raise r.fail(f"unsupported version {version} of apiKey {api_key} (only 0)")
    obj = reader(r)
    if r.pos != len(r.buf):
        raise r.fail(f"{len(r.buf) - r.pos} bytes left after the message")
    return obj
