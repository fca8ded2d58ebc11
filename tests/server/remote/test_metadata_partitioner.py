"""__remote_log_metadata partition of a user partition: Kafka's
RemoteLogMetadataTopicPartitioner (murmur2 of Objects.hash(lsb, msb, partition)). The expected
values were printed by Kafka's own code (Objects.hash and Utils.murmur2) run on Java 17."""

from __future__ import annotations

import uuid

import pytest

from tidelog.server.remote_log_metadata_manager import metadata_partition
from tidelog.storage.remote.metadata import TopicIdPartition

# (topic id, partition, metadata partition of 50, of 7)
KAFKA_VECTORS = [
    ("00000000-0000-0000-0000-000000000000", 0, 6, 2),
    ("00000000-0000-0000-0000-000000000000", 1, 30, 2),
    ("00000000-0000-0000-0000-000000000000", 49, 8, 0),
    ("123e4567-e89b-12d3-a456-426614174000", 0, 19, 3),
    ("123e4567-e89b-12d3-a456-426614174000", 7, 39, 2),
    ("123e4567-e89b-12d3-a456-426614174000", 1000, 13, 2),
    ("ffffffff-ffff-ffff-ffff-ffffffffffff", 7, 31, 6),
    ("9b2f6f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", 0, 20, 4),
    ("9b2f6f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", 1, 30, 5),
    ("9b2f6f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", 49, 0, 5),
    ("9b2f6f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b", 1000, 41, 4),
]


@pytest.mark.parametrize(("topic_id", "partition", "of_50", "of_7"), KAFKA_VECTORS)
def test_metadata_partition_is_kafkas(topic_id: str, partition: int, of_50: int,
                                      of_7: int) -> None:
    tip = TopicIdPartition(uuid.UUID(topic_id), "t", partition)
    assert metadata_partition(tip, 50) == of_50
    assert metadata_partition(tip, 7) == of_7
