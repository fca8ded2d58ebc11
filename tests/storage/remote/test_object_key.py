"""Object keys: Aiven's layout, with Kafka's Uuid text."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    uuid_from_str,
    uuid_to_str,
)
from tidelog.storage.remote.object_key import ObjectKeyFactory
from tidelog.storage.remote.storage_manager import IndexType

METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID: AAAAAAAAAAAAAAAAAAAAAQ
ZERO_UUID = uuid.UUID(int=0)
METADATA = RemoteLogSegmentMetadata(
    RemoteLogSegmentId(TopicIdPartition(METADATA_TOPIC_ID, "topic", 7), ZERO_UUID),
    1234, 2000, 0, 1, 0, {0: 1234}, 10)


def test_keys_as_aivens_object_key_factory() -> None:
    keys = ObjectKeyFactory("prefix/")
    main = "prefix/topic-AAAAAAAAAAAAAAAAAAAAAQ/7/00000000000000001234-AAAAAAAAAAAAAAAAAAAAAA"
    assert keys.log_key(METADATA) == main + ".log"
    assert {t: keys.index_key(METADATA, t) for t in IndexType} == {
        IndexType.OFFSET: main + ".index",
        IndexType.TIMESTAMP: main + ".timeindex",
        IndexType.PRODUCER_SNAPSHOT: main + ".snapshot",
        IndexType.TRANSACTION: main + ".txnindex",
        IndexType.LEADER_EPOCH: main + ".leader_epoch_checkpoint",
    }
    assert ObjectKeyFactory().log_key(METADATA) == main.removeprefix("prefix/") + ".log"
    assert keys.all_keys(METADATA)[0] == main + ".log" and len(keys.all_keys(METADATA)) == 6


@given(st.uuids())
def test_kafka_uuid_text_round_trips(value: uuid.UUID) -> None:
    text = uuid_to_str(value)
    assert len(text) == 22 and "=" not in text
    assert uuid_from_str(text) == value


def test_bad_uuid_text() -> None:
    with pytest.raises(ValueError):
        uuid_from_str("AAAA")
