"""KIP-848 ``__consumer_offsets`` records byte for byte as Kafka's generated serializers lay
them out (keys: int16 type + classic strings; values: int16 version 0 + flexible body), and
the assignors' guarantees over arbitrary groups."""

from __future__ import annotations

import struct
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.server.coordinator.group.consumer.assignor import RangeAssignor, UniformAssignor
from tidelog.server.coordinator.group.consumer.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    MemberAssignment,
    MemberSubscription,
    TopicMetadata,
    decode_consumer_key,
    decode_current_assignment,
    decode_member_metadata,
    decode_partition_metadata,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_partition_metadata,
    format_consumer_record,
    format_offsets_record,
)
from tidelog.server.coordinator.group.records import encode_offset_key

TID = uuid.UUID("0123456789abcdef0123456789abcdef")


def _s(text: str) -> bytes:  # a classic (int16-length) string
    return struct.pack(">h", len(text)) + text.encode()


def _cs(text: str | None) -> bytes:  # a compact string: varint(length + 1), 0 for null
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def test_keys_are_kafkas() -> None:
    assert encode_key(GROUP_METADATA, "grp") == b"\x00\x03" + _s("grp")
    key = encode_key(CURRENT_MEMBER_ASSIGNMENT, "grp", "m-1")
    assert key == b"\x00\x08" + _s("grp") + _s("m-1")
    k = decode_consumer_key(key)
    assert (k.record_type, k.group, k.member_id) == (8, "grp", "m-1")


def test_values_are_kafkas() -> None:
    assert encode_epoch(7) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    a = MemberAssignment(5, 4, 1, {TID: frozenset({2, 0})}, {})
    expected = (b"\x00\x00" + struct.pack(">iib", 5, 4, 1)
                + b"\x02" + TID.bytes + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"  # assigned
                + b"\x01"  # no partitions pending revocation
                + b"\x00")
    assert encode_current_assignment(a) == expected
    assert decode_current_assignment(expected) == a
    sub = MemberSubscription("cid", "/h", ("t1",), None, 300000, "uniform", None, "r1")
    raw = encode_member_metadata(sub)
    assert raw == (b"\x00\x00" + _cs(None) + _cs("r1") + _cs("cid") + _cs("/h") + b"\x02"
                   + _cs("t1") + _cs(None) + struct.pack(">i", 300000) + _cs("uniform")
                   + b"\x00")
    assert decode_member_metadata(raw) == sub
    topics = {"t": TopicMetadata(TID, "t", 3)}
    raw = encode_partition_metadata(topics)
    assert raw == (b"\x00\x00\x02" + TID.bytes + _cs("t") + struct.pack(">i", 3) + b"\x01\x00"
                   + b"\x00")
    assert decode_partition_metadata(raw) == topics


def test_dump_form_names_the_record() -> None:
    line = format_consumer_record(encode_key(MEMBER_METADATA, "grp", "m"), None)
    assert line == "consumer_group_member_metadata::group=grp,member=m => <tombstone>"
    line = format_consumer_record(encode_key(GROUP_METADATA, "grp"), encode_epoch(3))
    assert line == "consumer_group_metadata::group=grp => epoch=3"
    assert format_offsets_record(encode_key(GROUP_METADATA, "grp"), None) == (
        "consumer_group_metadata::group=grp => <tombstone>")
    classic = format_offsets_record(encode_offset_key("grp", "t", 1), None)
    assert classic == "offset_commit::group=grp,topic=t,partition=1 => <tombstone>"


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, frozenset[str]], dict[str, TopicMetadata]]:
    names = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True))
    topics = {n: TopicMetadata(uuid.uuid5(TID, n), n, draw(st.integers(0, 9))) for n in names}
    members = draw(st.lists(st.text("xyz0123", min_size=1, max_size=3), min_size=1,
                            max_size=6, unique=True))
    homogeneous = draw(st.booleans())
    subs = {m: frozenset(names) if homogeneous else frozenset(
        draw(st.lists(st.sampled_from(names), min_size=1, unique=True))) for m in members}
    return subs, topics


def _slots(a: dict[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


@settings(max_examples=200, deadline=None)
@given(group=groups(), newcomer=st.booleans())
def test_assignors_give_each_partition_to_one_subscriber(
        group: tuple[dict[str, frozenset[str]], dict[str, TopicMetadata]],
        newcomer: bool) -> None:
    subs, topics = group
    every = {(t.topic_id, p) for t in topics.values() for p in range(t.num_partitions)
             if any(t.name in s for s in subs.values())}
    by_id = {t.topic_id: t.name for t in topics.values()}
    for assignor in (UniformAssignor(), RangeAssignor()):
        target = assignor.assign(subs, topics, {})
        got = [s for a in target.values() for s in _slots(a)]
        assert sorted(got) == sorted(every)  # each exactly once
        for m, a in target.items():
            assert {by_id[t] for t in a} <= subs[m]
    uniform = UniformAssignor().assign(subs, topics, {})
    if len({s for s in subs.values()}) == 1:  # homogeneous: counts differ by one at most
        counts = [len(_slots(a)) for a in uniform.values()]
        assert max(counts) - min(counts) <= 1
        if newcomer:  # sticky: a joining member only takes, the others only give
            grown = dict(subs)
            grown["new-member"] = next(iter(subs.values()))
            after = UniformAssignor().assign(grown, topics, uniform)
            for m in subs:
                assert _slots(after[m]) <= _slots(uniform[m])
            counts = [len(_slots(a)) for a in after.values()]
            assert max(counts) - min(counts) <= 1
