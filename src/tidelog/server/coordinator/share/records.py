"""``__share_group_state`` records, byte-for-byte Kafka's share coordinator (KIP-932).

  ShareSnapshotKey v0 (group, topic id, partition) -> ShareSnapshotValue v0 (flexible):
    snapshot epoch (uint16), state epoch, leader epoch, start offset, state batches
    [first offset, last offset, delivery state 0 Available / 2 Acknowledged / 4 Archived,
    delivery count].
  ShareUpdateKey v1 (same fields) -> ShareUpdateValue: read and applied on top of the
    snapshot of the same snapshot epoch; this broker writes snapshots only.

A share-partition's state lives in partition ``abs(hash("group:topicId:partition")) % n`` of
the topic, ``topicId`` in Kafka's base64 form, as the share coordinator places it.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from tidelog.server.coordinator.record_codec import (
    RecordReader,
    RecordWriter,
    SchemaError,
    kafka_uuid,
)
from tidelog.util.java_hash import java_abs, java_string_hash

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY = 0
UPDATE_KEY = 1

StateBatch = tuple[int, int, int, int]  # first offset, last offset, state, delivery count


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    version: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareState:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = field(default_factory=tuple)


def state_partition_for(group_id: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    key = f"{group_id}:{kafka_uuid(topic_id)}:{partition}"
    return java_abs(java_string_hash(key)) % n


def encode_key(group_id: str, topic_id: uuid.UUID, partition: int,
               version: int = SNAPSHOT_KEY) -> bytes:
    w = RecordWriter()
    w.i16(version)
    w.string(group_id)
    w.buf += topic_id.bytes
    w.i32(partition)
    return bytes(w.buf)


def decode_key(data: bytes) -> ShareStateKey:
    r = RecordReader(data)
    version = r.i16()
    if version not in (SNAPSHOT_KEY, UPDATE_KEY):
        raise SchemaError(f"not a share state key: version {version}")
    group = r.string()
    topic_id = uuid.UUID(bytes=bytes(r.take(16)))
    return ShareStateKey(version, group, topic_id, r.i32())


def encode_snapshot(v: ShareState) -> bytes:
    w = RecordWriter(flexible=True)
    w.i16(0)
    w.buf += struct.pack(">H", v.snapshot_epoch & 0xFFFF)
    w.i32(v.state_epoch)
    w.i32(v.leader_epoch)
    w.i64(v.start_offset)
    w.array_len(len(v.batches))
    for first, last, state, count in v.batches:
        w.i64(first)
        w.i64(last)
        w.buf += struct.pack(">b", state)
        w.i16(count)
        w.tags()
    w.tags()
    return bytes(w.buf)


def decode_value(data: bytes, key_version: int) -> ShareState:
    """A snapshot value, or an update value (no state epoch) read into the same shape."""
    r = RecordReader(data)
    if r.i16() != 0:
        raise SchemaError("unknown share state value version")
    r.flexible = True
    snapshot_epoch = int(struct.unpack(">H", r.take(2))[0])
    state_epoch = r.i32() if key_version == SNAPSHOT_KEY else -1
    leader_epoch = r.i32()
    start = r.i64()
    batches = []
    for _ in range(r.array_len()):
        first, last, state, count = r.i64(), r.i64(), r.i8(), r.i16()
        r.skip_tags()
        batches.append((first, last, state, count))
    r.skip_tags()
    return ShareState(snapshot_epoch, state_epoch, leader_epoch, start, tuple(batches))
