"""``__remote_log_metadata`` record values: Kafka's bytes, round trips, bad input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.storage.remote.metadata import (
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
from tidelog.storage.remote.metadata_serde import (
    RemoteLogMetadataSerdeError,
    deserialize,
    serialize,
)

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
SEGMENT_ID = uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100")
TIP = TopicIdPartition(TOPIC_ID, "ab", 7)
SID = RemoteLogSegmentId(TIP, SEGMENT_ID)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
uuids = st.uuids()
tips = st.builds(TopicIdPartition, uuids, st.text(max_size=30), i32)
sids = st.builds(RemoteLogSegmentId, tips, uuids)
custom = st.none() | st.binary(max_size=64)


@st.composite
def segments(draw: st.DrawFn) -> RemoteLogSegmentMetadata:
    start = draw(st.integers(0, 2**62))
    end = draw(st.integers(start, 2**63 - 1))
    epochs = draw(st.dictionaries(st.integers(0, 2**31 - 1), st.integers(start, end),
                                  min_size=1, max_size=5))
    return RemoteLogSegmentMetadata(
        draw(sids), start, end, draw(i64), draw(i32), draw(i64), epochs, draw(i32),
        draw(custom), draw(st.sampled_from(RemoteLogSegmentState)), draw(st.booleans()))


updates = st.builds(
    RemoteLogSegmentMetadataUpdate, sids, i64, custom,
    st.sampled_from([s for s in RemoteLogSegmentState
                     if s is not RemoteLogSegmentState.COPY_SEGMENT_STARTED]), i32)
deletes = st.builds(RemotePartitionDeleteMetadata, tips,
                    st.sampled_from(RemotePartitionDeleteState), i64, i32)
snapshots = segments().map(RemoteLogSegmentMetadataSnapshot.create)


@given(st.one_of(segments(), updates, deletes, snapshots))
def test_round_trip(obj: RemoteLogMetadata) -> None:
    data = serialize(obj)
    assert deserialize(data) == obj
    assert serialize(deserialize(data)) == data


def _fixture_segment(txn_index_empty: bool = False) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        SID, start_offset=5, end_offset=9, max_timestamp_ms=1, broker_id=2,
        event_timestamp_ms=3, segment_leader_epochs={4: 5}, segment_size_in_bytes=100,
        custom_metadata=b"\x01", state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
        txn_index_empty=txn_index_empty)


# RemoteLogSegmentMetadataRecord v0 as Kafka's BytesApiMessageSerde frames it, field by field
SEGMENT_BYTES = bytes.fromhex(
    "01" "00" "00"                              # frame version 1, apiKey 0, version 0
    "03" "6162"                                 # TopicIdPartition.Name: compact "ab"
    "00112233445566778899aabbccddeeff"          # TopicIdPartition.Id
    "00000007" "00"                             # Partition 7, no tagged fields
    "ffeeddccbbaa99887766554433221100" "00"     # RemoteLogSegmentId.Id, no tagged fields
    "0000000000000005" "0000000000000009"       # StartOffset 5, EndOffset 9
    "00000002"                                  # BrokerId 2
    "0000000000000001" "0000000000000003"       # MaxTimestampMs 1, EventTimestampMs 3
    "02" "00000004" "0000000000000005" "00"     # SegmentLeaderEpochs: [(4, 5)]
    "00000064"                                  # SegmentSizeInBytes 100
    "02" "01"                                   # CustomMetadata: compact bytes 01
    "01"                                        # RemoteLogSegmentState COPY_SEGMENT_FINISHED
    "00"                                        # no tagged fields
)


def test_segment_metadata_bytes_are_kafkas() -> None:
    assert serialize(_fixture_segment()) == SEGMENT_BYTES
    assert deserialize(SEGMENT_BYTES) == _fixture_segment()


def test_txn_index_empty_is_tagged_field_zero() -> None:
    data = serialize(_fixture_segment(txn_index_empty=True))
    assert data == SEGMENT_BYTES[:-1] + bytes.fromhex("01" "00" "01" "01")
    assert deserialize(data).txn_index_empty is True  # type: ignore[union-attr]


def test_update_and_delete_bytes() -> None:
    update = RemoteLogSegmentMetadataUpdate(
        SID, 3, None, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 2)
    assert serialize(update) == bytes.fromhex(
        "01" "01" "00" "03" "6162" + TOPIC_ID.hex + "00000007" "00" + SEGMENT_ID.hex + "00"
        "00000002" "0000000000000003" "00" "02" "00")
    delete = RemotePartitionDeleteMetadata(
        TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 3, 2)
    assert serialize(delete) == bytes.fromhex(
        "01" "02" "00" "03" "6162" + TOPIC_ID.hex + "00000007" "00"
        "00000002" "0000000000000003" "01" "00")


def test_unknown_tagged_fields_are_skipped() -> None:
    data = SEGMENT_BYTES[:-1] + bytes.fromhex("01" "05" "02" "abcd")
    assert deserialize(data) == _fixture_segment()


@pytest.mark.parametrize(("data", "message"), [
    (b"", "runs past the end"),
    (bytes.fromhex("00 00 00"), "unknown frame version 0"),
    (bytes.fromhex("01 09 00"), "unknown apiKey 9"),
    (bytes.fromhex("01 00 01"), "unsupported version 1"),
    (SEGMENT_BYTES[:-5], "runs past the end"),
    (SEGMENT_BYTES + b"\x00", "1 bytes left"),
    (SEGMENT_BYTES[:-2] + b"\x07\x00", "unknown RemoteLogSegmentState 7"),
])
def test_bad_input_names_the_byte(data: bytes, message: str) -> None:
    with pytest.raises(RemoteLogMetadataSerdeError, match=message) as e:
        deserialize(data)
    assert "at byte" in str(e.value)


def test_update_may_not_carry_copy_started() -> None:
    data = serialize(RemoteLogSegmentMetadataUpdate(
        SID, 3, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 2))
    with pytest.raises(RemoteLogMetadataSerdeError, match="COPY_SEGMENT_STARTED"):
        deserialize(data[:-2] + b"\x00\x00")
