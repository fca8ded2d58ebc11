"""``__consumer_offsets`` schemas: exact bytes, every version, Java's hashing."""

from __future__ import annotations

import struct

import pytest

from tidelog.server.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetAndMetadata,
    OffsetKey,
    UnknownKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    encode_offset_value_version,
    format_record,
    partition_for,
)
from tidelog.server.coordinator.record_codec import SchemaError
from tidelog.util.java_hash import java_string_hash


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE: Utils.abs maps it to 0
        ("é", 233),
        ("😀", 1772899),  # a surrogate pair counts as two UTF-16 units
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_partition_for_matches_kafka() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    # "my-group".hashCode() is -1906497762 (negative: the abs matters)
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert all(0 <= partition_for(f"g{i}", 7) < 7 for i in range(100))


def test_offset_key_bytes() -> None:
    key = encode_offset_key("g", "t", 5)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x05"
    assert decode_key(key) == OffsetKey("g", "t", 5, 1)
    # v0 keys (written by old brokers) have the same layout
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("g", "t", 5, 0)


def test_group_key_bytes() -> None:
    key = encode_group_key("grp")
    assert key == b"\x00\x02\x00\x03grp"
    assert decode_key(key) == GroupMetadataKey("grp")
    assert decode_key(b"\x00\x03\x00\x01x") == UnknownKey(3)


def test_offset_value_v3_bytes() -> None:
    v = OffsetAndMetadata(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7)
    data = encode_offset_value(v)
    assert data == struct.pack(">hqih1sq", 3, 42, 7, 1, b"m", 1000)
    assert decode_offset_value(data) == v


def test_offset_value_v1_carries_expire_timestamp() -> None:
    v = OffsetAndMetadata(offset=1, metadata="", commit_timestamp=5, expire_timestamp=99)
    data = encode_offset_value(v)
    assert data == struct.pack(">hqhqq", 1, 1, 0, 5, 99)
    assert decode_offset_value(data) == v


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_value_all_versions_round_trip(version: int) -> None:
    v = OffsetAndMetadata(offset=123, metadata="meta", commit_timestamp=77, leader_epoch=3)
    got = decode_offset_value(encode_offset_value_version(v, version))
    assert got.offset == 123 and got.metadata == "meta" and got.commit_timestamp == 77
    assert got.leader_epoch == (3 if version >= 3 else -1)


def test_offset_value_v4_is_flexible_and_skips_tags() -> None:
    v = OffsetAndMetadata(offset=9, metadata="ab", commit_timestamp=1, leader_epoch=2)
    data = encode_offset_value_version(v, 4)
    # compact string: length+1 as an unsigned varint, then an empty tag section
    assert data == struct.pack(">hqi", 4, 9, 2) + b"\x03ab" + struct.pack(">q", 1) + b"\x00"
    tagged = data[:-1] + b"\x01\x05\x02zz"  # one unknown tag (5) of two bytes
    assert decode_offset_value(tagged) == v


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=12345,
        members=[
            MemberMetadataRecord("m1", "c1", "/1.2.3.4", 10000, 30000, b"sub", b"asg", "inst-1"),
            MemberMetadataRecord("m2", "c2", "/1.2.3.5", 10000, 30000, b"", b"", None),
        ],
    )


def test_group_value_v3_bytes() -> None:
    data = encode_group_value(_group_value())
    expected = (
        struct.pack(">h", 3)
        + b"\x00\x08consumer"
        + struct.pack(">i", 3)
        + b"\x00\x05range"
        + b"\x00\x02m1"
        + struct.pack(">q", 12345)
        + struct.pack(">i", 2)
        + b"\x00\x02m1" + b"\x00\x06inst-1" + b"\x00\x02c1" + b"\x00\x08/1.2.3.4"
        + struct.pack(">ii", 30000, 10000) + struct.pack(">i", 3) + b"sub"
        + struct.pack(">i", 3) + b"asg"
        + b"\x00\x02m2" + b"\xff\xff" + b"\x00\x02c2" + b"\x00\x08/1.2.3.5"
        + struct.pack(">ii", 30000, 10000) + struct.pack(">i", 0) + struct.pack(">i", 0)
    )  # fmt: skip
    assert data == expected
    assert decode_group_value(data) == _group_value()


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_all_versions(version: int) -> None:
    got = decode_group_value(encode_group_value(_group_value(), version))
    assert got.protocol == "range" and got.generation == 3 and len(got.members) == 2
    assert got.members[0].assignment == b"asg"
    assert got.members[0].group_instance_id == ("inst-1" if version >= 3 else None)
    assert got.current_state_timestamp == (12345 if version >= 2 else -1)
    assert got.members[0].rebalance_timeout == (30000 if version >= 1 else 10000)


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    v = GroupMetadataValue("consumer", 4, None, None, 1, [])
    data = encode_group_value(v)
    assert data == struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(
        ">ihhqi", 4, -1, -1, 1, 0
    )
    assert decode_group_value(data) == v


def test_truncated_and_unknown_values_raise() -> None:
    data = encode_offset_value(OffsetAndMetadata(1, "x", 2))
    with pytest.raises(SchemaError):
        decode_offset_value(data[:-3])
    with pytest.raises(SchemaError):
        decode_offset_value(b"\x00\x09" + data[2:])
    with pytest.raises(SchemaError):
        decode_group_value(b"\x00\x05")


def test_format_record() -> None:
    key = encode_offset_key("g", "t", 0)
    assert "offset=5" in format_record(key, encode_offset_value(OffsetAndMetadata(5, "", 1)))
    assert "tombstone" in format_record(key, None)
    assert "generation=3" in format_record(
        encode_group_key("g"), encode_group_value(_group_value())
    )
