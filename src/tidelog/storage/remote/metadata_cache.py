"""Kafka's ``RemoteLogMetadataCache``: one partition's remote segments, by leader epoch.

Pure and replayable: feeding the records of ``__remote_log_metadata`` for the partition in
order (:meth:`RemoteLogMetadataCache.apply`) rebuilds the same state on any broker. State
transitions are checked as Kafka's ``RemoteLogSegmentState.isValidTransition`` and
``RemoteLogLeaderEpochState`` do them.
"""

from __future__ import annotations

from collections.abc import Iterator

from .metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)


class InvalidRemoteLogStateError(ValueError):
    """Kafka's ``IllegalStateException`` of the cache: a state transition Kafka refuses, or
    a record for another partition."""


class RemoteLogMetadataCache:
    """The remote segments of one partition (Kafka's ``RemoteLogMetadataCache``)."""

    def __init__(self, topic_id_partition: TopicIdPartition) -> None:
        self.topic_id_partition = topic_id_partition

    def apply(self, record: RemoteLogMetadata) -> None:
        """Replay one record value of ``__remote_log_metadata`` (dispatches to the methods
        below; snapshot records are not for this cache and raise)."""
        raise NotImplementedError

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Kafka's ``addCopyInProgressSegment``: a COPY_SEGMENT_STARTED segment."""
        raise NotImplementedError

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Kafka's ``updateRemoteLogSegmentMetadata``: COPY_SEGMENT_FINISHED makes the segment
        readable, DELETE_SEGMENT_STARTED makes it unreadable, DELETE_SEGMENT_FINISHED forgets
        it. Unknown id: RemoteResourceNotFoundError; refused transition:
        InvalidRemoteLogStateError."""
        raise NotImplementedError

    def update_partition_delete(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Kafka's ``RemotePartitionMetadataStore.handleRemotePartitionDeleteMetadata``."""
        raise NotImplementedError

    @property
    def partition_delete_state(self) -> RemotePartitionDeleteState | None:
        raise NotImplementedError

    def remote_log_segment_metadata(self, leader_epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """Kafka's ``remoteLogSegmentMetadata(leaderEpoch, offset)``: the COPY_SEGMENT_FINISHED
        segment holding ``offset`` within ``leader_epoch``'s range of it, or None."""
        raise NotImplementedError

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """Kafka's ``highestOffsetForEpoch``: the highest offset of ``leader_epoch`` in any
        COPY_SEGMENT_FINISHED segment so far (not lowered by deletes), or None."""
        raise NotImplementedError

    def list_remote_log_segments(self, leader_epoch: int | None = None
                                 ) -> Iterator[RemoteLogSegmentMetadata]:
        """The readable (COPY_SEGMENT_FINISHED) segments, by start offset; only those with
        records of ``leader_epoch`` when given."""
        raise NotImplementedError

    def list_all(self) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment not yet DELETE_SEGMENT_FINISHED, in any state (COPY_SEGMENT_STARTED
        ones are uploads that may have been cut), by start offset then event time."""
        raise NotImplementedError

    def segment(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The current metadata of ``segment_id`` (any state), or None."""
        raise NotImplementedError
