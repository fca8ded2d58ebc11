"""``__consumer_offsets`` record schemas, byte-for-byte Kafka's.

Keys (the key's leading int16 is the schema version):
  * OffsetCommitKey v0/v1: group, topic, partition.
  * GroupMetadataKey v2: group.
Values (leading int16 version; a null value is a tombstone):
  * OffsetCommitValue v0-v4 (v1 carries an explicit expire timestamp, v3+ the leader epoch,
    v4 is the first flexible version).
  * GroupMetadataValue v0-v4 (v1+ rebalance timeout, v2+ current state timestamp,
    v3+ group instance id, v4 flexible).
Kafka writes OffsetCommitValue v3 (v1 when the commit carries a retention time) and
GroupMetadataValue v3; we do the same so Kafka's tools read our segments.

Partitioning is Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field

from tidelog.server.coordinator.record_codec import (
    RecordReader,
    RecordWriter,
    SchemaError,
)
from tidelog.util.java_hash import java_abs, java_string_hash

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_NUM_PARTITIONS = 50

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_KEY_HEAD = struct.Struct(">hh")
_VALUE_V3_HEAD = struct.Struct(">hqih")


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    return java_abs(java_string_hash(group_id)) % num_partitions


# --------------------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key version this coordinator does not handle (e.g. KIP-848 records); skipped."""

    version: int


BaseKey = OffsetKey | GroupMetadataKey | UnknownKey


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    g = group.encode("utf-8")
    t = topic.encode("utf-8")
    return b"".join(
        (_KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(g)), g, _I16.pack(len(t)), t,
         _I32.pack(partition))
    )  # fmt: skip


def encode_group_key(group: str) -> bytes:
    w = RecordWriter()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.buf)


def _short_string(data: bytes, pos: int) -> tuple[str, int]:
    """A non-nullable int16-length string (the hot path of loading, without a reader)."""
    (n,) = _I16.unpack_from(data, pos)
    end = pos + 2 + n
    if n < 0 or end > len(data):
        raise SchemaError(f"bad string of length {n} at {pos}")
    return data[pos + 2 : end].decode("utf-8"), end


def decode_key(data: bytes) -> BaseKey:
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version in (0, 1):
            group, pos = _short_string(data, 2)
            topic, pos = _short_string(data, pos)
            (partition,) = _I32.unpack_from(data, pos)
            return OffsetKey(group, topic, partition, version)
        if version == 2:
            return GroupMetadataKey(_short_string(data, 2)[0], version)
    except struct.error as exc:
        raise SchemaError(f"truncated key: {exc}") from None
    return UnknownKey(version)


# --------------------------------------------------------------------------- offset values


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """Kafka's OffsetAndMetadata: what a commit stores for one partition."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int | None = None


def encode_offset_value(v: OffsetAndMetadata) -> bytes:
    if v.expire_timestamp is not None:
        return encode_offset_value_version(v, OFFSET_COMMIT_VALUE_VERSION_EXPIRE)
    md = v.metadata.encode("utf-8")
    return b"".join(
        (_VALUE_V3_HEAD.pack(3, v.offset, v.leader_epoch, len(md)), md,
         _I64.pack(v.commit_timestamp))
    )  # fmt: skip


def encode_offset_value_version(v: OffsetAndMetadata, version: int) -> bytes:
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown OffsetCommitValue version {version}")
    w = RecordWriter(flexible=version >= 4)
    w.i16(version)
    w.i64(v.offset)
    if version >= 3:
        w.i32(v.leader_epoch)
    w.string(v.metadata)
    w.i64(v.commit_timestamp)
    if version == 1:
        w.i64(-1 if v.expire_timestamp is None else v.expire_timestamp)
    w.tags()
    return bytes(w.buf)


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    version = _I16.unpack_from(data, 0)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown OffsetCommitValue version {version}")
    if version == 4:
        return _decode_offset_value_flexible(data)
    try:
        (offset,) = _I64.unpack_from(data, 2)
        pos = 10
        leader_epoch = -1
        if version == 3:
            (leader_epoch,) = _I32.unpack_from(data, pos)
            pos += 4
        metadata, pos = _short_string(data, pos)
        (commit_ts,) = _I64.unpack_from(data, pos)
        expire = _I64.unpack_from(data, pos + 8)[0] if version == 1 else None
    except struct.error as exc:
        raise SchemaError(f"truncated OffsetCommitValue: {exc}") from None
    if expire is not None and expire < 0:
        expire = None
    return OffsetAndMetadata(offset, metadata, commit_ts, leader_epoch, expire)


def _decode_offset_value_flexible(data: bytes) -> OffsetAndMetadata:
    r = RecordReader(data, flexible=True)
    r.pos = 2
    offset = r.i64()
    leader_epoch = r.i32()
    metadata = r.string()
    commit_ts = r.i64()
    r.skip_tags()
    return OffsetAndMetadata(offset, metadata, commit_ts, leader_epoch, None)


# --------------------------------------------------------------------------- group values


@dataclass(slots=True)
class MemberMetadataRecord:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataRecord] = field(default_factory=list)


def encode_group_value(v: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown GroupMetadataValue version {version}")
    w = RecordWriter(flexible=version >= 4)
    w.i16(version)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.i64(v.current_state_timestamp)
    w.array_len(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.buf)


def _decode_member(r: RecordReader, version: int) -> MemberMetadataRecord:
    member_id = r.string()
    instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout = r.i32() if version >= 1 else -1
    session_timeout = r.i32()
    if version == 0:
        rebalance_timeout = session_timeout  # v0 had one timeout for both
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.skip_tags()
    return MemberMetadataRecord(
        member_id,
        client_id,
        client_host,
        session_timeout,
        rebalance_timeout,
        subscription,
        assignment,
        instance_id,
    )


def decode_group_value(data: bytes) -> GroupMetadataValue:
    version = _I16.unpack_from(data, 0)[0] if len(data) >= 2 else -1
    if not 0 <= version <= 4:
        raise SchemaError(f"unknown GroupMetadataValue version {version}")
    r = RecordReader(data, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    ts = r.i64() if version >= 2 else -1
    members = [_decode_member(r, version) for _ in range(r.array_len())]
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, ts, members)


def format_record(key: bytes | None, value: bytes | None) -> str:
    """A one-line human form of a ``__consumer_offsets`` record (for dump tools)."""
    if key is None:
        return "<null key>"
    k = decode_key(key)
    if isinstance(k, OffsetKey):
        head = f"offset_commit::group={k.group},topic={k.topic},partition={k.partition}"
        if value is None:
            return f"{head} => <tombstone>"
        o = decode_offset_value(value)
        return (
            f"{head} => offset={o.offset},leader_epoch={o.leader_epoch},"
            f"metadata={o.metadata!r},commit_timestamp={o.commit_timestamp}"
            + (f",expire_timestamp={o.expire_timestamp}" if o.expire_timestamp else "")
        )
    if isinstance(k, GroupMetadataKey):
        head = f"group_metadata::group={k.group}"
        if value is None:
            return f"{head} => <tombstone>"
        g = decode_group_value(value)
        members = ",".join(m.member_id for m in g.members)
        return (
            f"{head} => protocol_type={g.protocol_type},generation={g.generation},"
            f"protocol={g.protocol},leader={g.leader},members=[{members}]"
        )
    return f"unknown key version {k.version}"
