"""KIP-848 consumer group records of ``__consumer_offsets``, byte-for-byte Kafka 4.x's.

Keys are classic (non-flexible) structs whose leading int16 is the record type:
  3 ConsumerGroupMetadataKey(group)              -> ConsumerGroupMetadataValue(epoch)
  4 ConsumerGroupPartitionMetadataKey(group)     -> ...PartitionMetadataValue(topics)
  5 ConsumerGroupMemberMetadataKey(group, member) -> ...MemberMetadataValue(subscription)
  6 ConsumerGroupTargetAssignmentMetadataKey(group) -> ...MetadataValue(assignment epoch)
  7 ConsumerGroupTargetAssignmentMemberKey(group, member) -> ...MemberValue(partitions)
  8 ConsumerGroupCurrentMemberAssignmentKey(group, member) -> ...AssignmentValue(epochs,
    state, assigned, pending revocation)
Values are version 0, flexible (compact strings and arrays, tagged fields). A null value is
a tombstone. Partitions are named by topic id, as Kafka stores them.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidelog.server.coordinator.group.records import format_record
from tidelog.server.coordinator.record_codec import RecordReader, RecordWriter, SchemaError

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_TYPES = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})

# topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    record_type: int
    group: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """ConsumerGroupMemberMetadataValue's ClassicMemberMetadata (tagged field 0): a member of
    a consumer group that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """ConsumerGroupMemberMetadataValue."""

    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    instance_id: str | None = None
    rack_id: str | None = None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


# --------------------------------------------------------------------------- keys


def encode_key(record_type: int, group: str, member_id: str = "") -> bytes:
    w = RecordWriter()
    w.i16(record_type)
    w.string(group)
    if record_type in _MEMBER_KEYS:
        w.string(member_id)
    return bytes(w.buf)


def group_tombstones(group_id: str) -> list[Record]:
    """What deleting an empty group writes (its members are gone already)."""
    return [(encode_key(t, group_id), None)
            for t in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)]


def decode_consumer_key(data: bytes) -> ConsumerKey:
    r = RecordReader(data)
    record_type = r.i16()
    if record_type not in CONSUMER_KEY_TYPES:
        raise SchemaError(f"not a consumer group key: type {record_type}")
    group = r.string()
    member_id = r.string() if record_type in _MEMBER_KEYS else ""
    return ConsumerKey(record_type, group, member_id)


def key_type(data: bytes) -> int:
    if len(data) < 2:
        raise SchemaError("truncated key")
    return int(struct.unpack_from(">h", data)[0])


# --------------------------------------------------------------------------- values


def _flex() -> RecordWriter:
    w = RecordWriter(flexible=True)
    w.i16(0)
    return w


def _reader(data: bytes) -> RecordReader:
    r = RecordReader(data)
    version = r.i16()
    if version != 0:
        raise SchemaError(f"unknown consumer group value version {version}")
    r.flexible = True
    return r


def _write_partitions(w: RecordWriter, assignment: Mapping[uuid.UUID, frozenset[int]]) -> None:
    topics = [(t, ps) for t, ps in sorted(assignment.items(), key=lambda kv: kv[0].bytes) if ps]
    w.array_len(len(topics))
    for topic_id, parts in topics:
        w.buf += topic_id.bytes
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.tags()


def _read_partitions(r: RecordReader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_len()):
        topic_id = uuid.UUID(bytes=bytes(r.take(16)))
        parts = frozenset(r.i32() for _ in range(r.array_len()))
        r.skip_tags()
        if parts:
            out[topic_id] = parts
    return out


def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue."""
    w = _flex()
    w.i32(epoch)
    w.tags()
    return bytes(w.buf)


def decode_epoch(data: bytes) -> int:
    r = _reader(data)
    epoch = r.i32()
    r.skip_tags()
    return epoch


def encode_partition_metadata(topics: Mapping[str, TopicMetadata]) -> bytes:
    w = _flex()
    w.array_len(len(topics))
    for name in sorted(topics):
        t = topics[name]
        w.buf += t.topic_id.bytes
        w.string(t.name)
        w.i32(t.num_partitions)
        w.array_len(0)  # PartitionMetadata (racks): unused since Kafka 4.0
        w.tags()
    w.tags()
    return bytes(w.buf)


def decode_partition_metadata(data: bytes) -> dict[str, TopicMetadata]:
    r = _reader(data)
    out: dict[str, TopicMetadata] = {}
    for _ in range(r.array_len()):
        topic_id = uuid.UUID(bytes=bytes(r.take(16)))
        name = r.string()
        n = r.i32()
        for _ in range(r.array_len()):  # PartitionMetadata: partition, racks
            r.i32()
            for _ in range(r.array_len()):
                r.string()
            r.skip_tags()
        r.skip_tags()
        out[name] = TopicMetadata(topic_id, name, n)
    r.skip_tags()
    return out


def encode_member_metadata(m: MemberSubscription) -> bytes:
    w = _flex()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.array_len(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        w.string(name)
    w.string(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.string(m.server_assignor)
    if m.classic is None:
        w.tags()  # ClassicMemberMetadata (tag 0) is absent: the member speaks KIP-848
    else:
        body = RecordWriter(flexible=True)
        body.i32(m.classic.session_timeout_ms)
        body.array_len(len(m.classic.protocols))
        for name, metadata in m.classic.protocols:
            body.string(name)
            body.bytes_(metadata)
            body.tags()
        body.tags()
        w.uvarint(1)  # one tagged field: tag 0, its size, its struct
        w.uvarint(0)
        w.uvarint(len(body.buf))
        w.buf += body.buf
    return bytes(w.buf)


def _classic_metadata(r: RecordReader) -> ClassicMemberMetadata | None:
    """The value's tagged fields: ClassicMemberMetadata when tag 0 is there."""
    found = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = bytes(r.take(size))
        if tag != 0:
            continue
        t = RecordReader(data)
        t.flexible = True
        timeout = t.i32()
        protocols = []
        for _ in range(t.array_len()):
            name, metadata = t.string(), t.bytes_()
            t.skip_tags()
            protocols.append((name, metadata))
        found = ClassicMemberMetadata(timeout, tuple(protocols))
    return found


def decode_member_metadata(data: bytes) -> MemberSubscription:
    r = _reader(data)
    instance_id = r.nullable_string()
    rack_id = r.nullable_string()
    client_id = r.string()
    client_host = r.string()
    names = tuple(r.string() for _ in range(r.array_len()))
    regex = r.nullable_string()
    rebalance_timeout = r.i32()
    assignor = r.nullable_string()
    classic = _classic_metadata(r)
    return MemberSubscription(client_id, client_host, names, regex, rebalance_timeout, assignor,
                              instance_id, rack_id, classic)


def encode_target_member(assignment: Mapping[uuid.UUID, frozenset[int]]) -> bytes:
    w = _flex()
    _write_partitions(w, assignment)
    w.tags()
    return bytes(w.buf)


def decode_target_member(data: bytes) -> Assignment:
    r = _reader(data)
    out = _read_partitions(r)
    r.skip_tags()
    return out


def encode_current_assignment(a: MemberAssignment) -> bytes:
    w = _flex()
    w.i32(a.member_epoch)
    w.i32(a.previous_member_epoch)
    w.buf += struct.pack(">b", a.state)
    _write_partitions(w, a.assigned)
    _write_partitions(w, a.pending_revocation)
    w.tags()
    return bytes(w.buf)


def decode_current_assignment(data: bytes) -> MemberAssignment:
    r = _reader(data)
    epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = _read_partitions(r)
    pending = _read_partitions(r)
    r.skip_tags()
    return MemberAssignment(epoch, previous, state, assigned, pending)


# --------------------------------------------------------------------------- dump


_NAMES = {
    GROUP_METADATA: "consumer_group_metadata",
    PARTITION_METADATA: "consumer_group_partition_metadata",
    MEMBER_METADATA: "consumer_group_member_metadata",
    TARGET_ASSIGNMENT_METADATA: "consumer_group_target_assignment_metadata",
    TARGET_ASSIGNMENT_MEMBER: "consumer_group_target_assignment_member",
    CURRENT_MEMBER_ASSIGNMENT: "consumer_group_current_member_assignment",
}


def format_offsets_record(key: bytes | None, value: bytes | None) -> str:
    """Any ``__consumer_offsets`` record: KIP-848 ones here, the classic ones in records.py."""
    if key is not None and key_type(key) in CONSUMER_KEY_TYPES:
        return format_consumer_record(key, value)
    return format_record(key, value)


def format_consumer_record(key: bytes, value: bytes | None) -> str:
    """A one-line human form of a KIP-848 record (for ``dump-log --offsets-decoder``)."""
    k = decode_consumer_key(key)
    head = f"{_NAMES[k.record_type]}::group={k.group}"
    if k.member_id:
        head += f",member={k.member_id}"
    if value is None:
        return f"{head} => <tombstone>"
    body: object
    if k.record_type in (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA):
        body = f"epoch={decode_epoch(value)}"
    elif k.record_type == PARTITION_METADATA:
        body = [f"{t.name}:{t.num_partitions}" for t in decode_partition_metadata(value).values()]
    elif k.record_type == MEMBER_METADATA:
        body = decode_member_metadata(value)
    elif k.record_type == TARGET_ASSIGNMENT_MEMBER:
        body = _fmt(decode_target_member(value))
    else:
        a = decode_current_assignment(value)
        body = (f"epoch={a.member_epoch},previous_epoch={a.previous_member_epoch},"
                f"state={a.state},assigned={_fmt(a.assigned)},"
                f"pending_revocation={_fmt(a.pending_revocation)}")
    return f"{head} => {body}"


def _fmt(a: Assignment) -> str:
    return "{" + ",".join(f"{t}:{sorted(ps)}" for t, ps in a.items()) + "}"
