"""Remote log segment metadata: Kafka's ``RemoteLogSegmentMetadata`` and its kin.

Kafka's classes of ``org.apache.kafka.server.log.remote.storage`` as frozen dataclasses, with
Kafka's state ids (they go on the wire of ``__remote_log_metadata``, see
:mod:`.metadata_serde`) and Kafka's checks in the constructors.
"""

from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field


def uuid_to_str(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, unpadded (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_str(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``: the inverse of :func:`uuid_to_str`."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class TopicIdPartition:
    """Kafka's ``TopicIdPartition``: a partition of a topic, with the topic's id."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{uuid_to_str(self.topic_id)}:{self.topic}-{self.partition}"


@dataclass(frozen=True)
class RemoteLogSegmentId:
    """Kafka's ``RemoteLogSegmentId``: a partition and a random id for one copy of a segment
    (a segment copied twice, after a crash, gets two ids)."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    @staticmethod
    def generate_new(topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        return RemoteLogSegmentId(topic_id_partition, uuid.uuid4())

    def __str__(self) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={self.topic_id_partition}, id={uuid_to_str(self.id)}}}"


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's ``RemoteLogSegmentState`` with its byte ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(src: RemoteLogSegmentState | None,
                            target: RemoteLogSegmentState) -> bool:
        """Kafka's ``RemoteLogSegmentState.isValidTransition``: STARTED from nothing,
        then FINISHED or DELETE_STARTED, DELETE_STARTED -> DELETE_FINISHED."""
        if src is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        if src is target:
            return True
        return (src, target) in _SEGMENT_TRANSITIONS


_SEGMENT_TRANSITIONS = frozenset({
    (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
    (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED),
    (RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED),
    (RemoteLogSegmentState.DELETE_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED),
})


class RemotePartitionDeleteState(enum.IntEnum):
    """Kafka's ``RemotePartitionDeleteState`` with its byte ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(src: RemotePartitionDeleteState | None,
                            target: RemotePartitionDeleteState) -> bool:
        """Kafka's ``RemotePartitionDeleteState.isValidTransition``."""
        if src is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        if src is target:
            return True
        return int(target) == int(src) + 1


@dataclass(frozen=True)
class RemoteLogSegmentMetadataUpdate:
    """Kafka's ``RemoteLogSegmentMetadataUpdate``: a later state of a segment already
    announced with COPY_SEGMENT_STARTED."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        if self.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError("an update can not carry COPY_SEGMENT_STARTED "
                             "(that state is given by RemoteLogSegmentMetadata)")

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """Kafka's ``RemoteLogSegmentMetadata``: one remote segment, ``start_offset`` to
    ``end_offset`` inclusive; ``segment_leader_epochs`` maps each leader epoch of its
    records to the epoch's first offset in the segment (never empty)."""

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: dict[int, int] = field(hash=False)
    segment_size_in_bytes: int
    custom_metadata: bytes | None = None
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    txn_index_empty: bool = False

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            raise ValueError(f"Unexpected start offset = {self.start_offset}. "
                             "StartOffset for a remote segment cannot be negative")
        if self.end_offset < self.start_offset:
            raise ValueError(f"Unexpected end offset = {self.end_offset}. "
                             f"EndOffset for a remote segment cannot be less than "
                             f"startOffset = {self.start_offset}")
        if not self.segment_leader_epochs:
            raise ValueError("segmentLeaderEpochs can not be null or empty")
        # Kafka keeps a sorted (navigable) map: iteration is by epoch
        object.__setattr__(self, "segment_leader_epochs",
                           dict(sorted(self.segment_leader_epochs.items())))

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    def create_with_updates(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """Kafka's ``createWithUpdates``: this segment with the update's broker id, event
        time, custom metadata and state."""
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError("Given rlsmUpdate does not have this instance's remoteLogSegmentId.")
        return RemoteLogSegmentMetadata(
            self.remote_log_segment_id, self.start_offset, self.end_offset,
            self.max_timestamp_ms, update.broker_id, update.event_timestamp_ms,
            self.segment_leader_epochs, self.segment_size_in_bytes, update.custom_metadata,
            update.state, self.txn_index_empty)


@dataclass(frozen=True)
class RemotePartitionDeleteMetadata:
    """Kafka's ``RemotePartitionDeleteMetadata``: a partition's remote data being deleted."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int


@dataclass(frozen=True)
class RemoteLogSegmentMetadataSnapshot:
    """Kafka's ``RemoteLogSegmentMetadataSnapshot`` (apiKey 3 in ``__remote_log_metadata``
    snapshots): a segment's metadata without its partition (the snapshot file gives it)."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: dict[int, int] = field(hash=False)
    segment_size_in_bytes: int
    custom_metadata: bytes | None
    state: RemoteLogSegmentState
    txn_index_empty: bool = False

    @staticmethod
    def create(metadata: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataSnapshot:
        return RemoteLogSegmentMetadataSnapshot(
            metadata.remote_log_segment_id.id, metadata.start_offset, metadata.end_offset,
            metadata.max_timestamp_ms, metadata.broker_id, metadata.event_timestamp_ms,
            dict(metadata.segment_leader_epochs), metadata.segment_size_in_bytes,
            metadata.custom_metadata, metadata.state, metadata.txn_index_empty)


RemoteLogMetadata = (RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
                     | RemotePartitionDeleteMetadata | RemoteLogSegmentMetadataSnapshot)
"""What one ``__remote_log_metadata`` record value holds (Kafka's ``RemoteLogMetadata``)."""
