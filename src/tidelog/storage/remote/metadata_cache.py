"""Kafka's ``RemoteLogMetadataCache``: one partition's remote segments, by leader epoch.

Pure and replayable: feeding the records of ``__remote_log_metadata`` for the partition in
order (:meth:`RemoteLogMetadataCache.apply`) rebuilds the same state on any broker. State
transitions are checked as Kafka's ``RemoteLogSegmentState.isValidTransition`` and kept per
leader epoch as Kafka's ``RemoteLogLeaderEpochState``:

* COPY_SEGMENT_STARTED: known, never readable (an upload that may yet be cut);
* COPY_SEGMENT_FINISHED: readable, at each of its epochs' start offsets; the epoch's highest
  copied offset moves up; an earlier copy of the same offsets (a new leader's duplicate
  upload) is no longer found by offset lookups, but still listed;
* DELETE_SEGMENT_STARTED: no longer readable, still listed by :meth:`list_all` so that a new
  leader finishes the deletion;
* DELETE_SEGMENT_FINISHED: forgotten.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from .metadata import (
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
from .storage_manager import RemoteResourceNotFoundError

_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
_DELETE_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


class InvalidRemoteLogStateError(ValueError):
    """Kafka's ``IllegalStateException`` of the cache: a state transition Kafka refuses, or
    a record for another partition."""


def epoch_ranges(metadata: RemoteLogSegmentMetadata) -> Iterator[tuple[int, int, int]]:
    """(epoch, first offset, last offset) of each leader epoch in the segment: an epoch ends
    where the next begins, the last at the segment's end offset."""
    items = list(metadata.segment_leader_epochs.items())
    for i, (epoch, start) in enumerate(items):
        end = items[i + 1][1] - 1 if i + 1 < len(items) else metadata.end_offset
        yield epoch, start, end


@dataclass
class RemoteLogLeaderEpochState:
    """Kafka's ``RemoteLogLeaderEpochState``: one epoch's segments."""

    offset_to_id: dict[int, RemoteLogSegmentId] = field(default_factory=dict)
    unreferenced_segment_ids: set[RemoteLogSegmentId] = field(default_factory=set)
    highest_log_offset: int | None = None

    def handle_copy_started(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced_segment_ids.add(sid)

    def handle_copy_finished(self, start: int, sid: RemoteLogSegmentId, end: int) -> None:
        """Kafka's rule: segments of this epoch starting at or after ``start`` are duplicates
        (a new leader uploaded a superset of what the old one had) and become unreferenced,
        so a read at an offset finds the newest copy."""
        while self.offset_to_id and self.highest_log_offset is not None:
            last = max(self.offset_to_id)
            if last < start or self.highest_log_offset > end:
                break
            self.unreferenced_segment_ids.add(self.offset_to_id.pop(last))
        replaced = self.offset_to_id.get(start)
        if replaced is not None and replaced != sid:
            # Kafka's put() drops it from the epoch silently; kept here so that listing the
            # epoch still shows it to retention
            self.unreferenced_segment_ids.add(replaced)
        self.offset_to_id[start] = sid
        self.unreferenced_segment_ids.discard(sid)
        if self.highest_log_offset is None or end > self.highest_log_offset:
            self.highest_log_offset = end

    def handle_delete_started(self, start: int, sid: RemoteLogSegmentId) -> None:
        if self.offset_to_id.get(start) == sid:
            del self.offset_to_id[start]
        self.unreferenced_segment_ids.add(sid)

    def handle_delete_finished(self, sid: RemoteLogSegmentId) -> None:
        self.unreferenced_segment_ids.discard(sid)

    def is_empty(self) -> bool:
        return not self.offset_to_id and not self.unreferenced_segment_ids

    def floor_id(self, offset: int) -> RemoteLogSegmentId | None:
        starts = sorted(self.offset_to_id)
        i = bisect.bisect_right(starts, offset)
        return self.offset_to_id[starts[i - 1]] if i else None


class RemoteLogMetadataCache:
    """The remote segments of one partition (Kafka's ``RemoteLogMetadataCache``)."""

    def __init__(self, topic_id_partition: TopicIdPartition) -> None:
        self.topic_id_partition = topic_id_partition
        self._segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._order: dict[RemoteLogSegmentId, int] = {}  # arrival, to order equal offsets
        self._seq = 0
        self._epochs: dict[int, RemoteLogLeaderEpochState] = {}
        self._delete_state: RemotePartitionDeleteState | None = None

    def apply(self, record: RemoteLogMetadata) -> None:
        """Replay one record value of ``__remote_log_metadata`` for this partition; a
        snapshot entry (no partition of its own) is taken as this partition's."""
        if isinstance(record, RemoteLogSegmentMetadataSnapshot):
            self._load_snapshot(record)
            return
        if record.topic_id_partition != self.topic_id_partition:
            raise InvalidRemoteLogStateError(
                f"record for {record.topic_id_partition} given to the cache of "
                f"{self.topic_id_partition}")
        if isinstance(record, RemoteLogSegmentMetadata):
            self.add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            self.update_remote_log_segment_metadata(record)
        else:
            self.update_partition_delete(record)

    def _load_snapshot(self, s: RemoteLogSegmentMetadataSnapshot) -> None:
        sid = RemoteLogSegmentId(self.topic_id_partition, s.segment_id)
        metadata = RemoteLogSegmentMetadata(
            sid, s.start_offset, s.end_offset, s.max_timestamp_ms, s.broker_id,
            s.event_timestamp_ms, s.segment_leader_epochs, s.segment_size_in_bytes,
            s.custom_metadata, _STARTED, s.txn_index_empty)
        self.add_copy_in_progress_segment(metadata)
        for state in (_FINISHED, _DELETE_STARTED, _DELETE_FINISHED):
            if state > s.state:
                break
            self.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
                sid, s.event_timestamp_ms, s.custom_metadata, state, s.broker_id))

    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Kafka's ``addCopyInProgressSegment``: a COPY_SEGMENT_STARTED segment."""
        if metadata.state is not _STARTED:
            raise InvalidRemoteLogStateError(
                f"Given remoteLogSegmentMetadata should have state as {_STARTED.name} "
                f"but it contains state as: {metadata.state.name}")
        sid = metadata.remote_log_segment_id
        existing = self._segments.get(sid)
        if existing is not None and existing.state is not _STARTED:
            raise InvalidRemoteLogStateError(
                f"segment {sid} is already in state {existing.state.name}")
        self._segments[sid] = metadata
        self._order.setdefault(sid, self._seq)
        self._seq += 1
        for epoch in metadata.segment_leader_epochs:
            self._epochs.setdefault(epoch, RemoteLogLeaderEpochState()).handle_copy_started(sid)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Kafka's ``updateRemoteLogSegmentMetadata``: COPY_SEGMENT_FINISHED makes the segment
        readable, DELETE_SEGMENT_STARTED makes it unreadable, DELETE_SEGMENT_FINISHED forgets
        it. Unknown id: RemoteResourceNotFoundError; refused transition:
        InvalidRemoteLogStateError."""
        sid = update.remote_log_segment_id
        existing = self._segments.get(sid)
        if existing is None:
            raise RemoteResourceNotFoundError(f"No remote log segment metadata found for :{sid}")
        if not RemoteLogSegmentState.is_valid_transition(existing.state, update.state):
            raise InvalidRemoteLogStateError(
                f"Current state: {existing.state.name}, target state: {update.state.name} "
                f"of segment {sid}")
        updated = existing.create_with_updates(update)
        for epoch, start, end in epoch_ranges(updated):
            state = self._epochs.setdefault(epoch, RemoteLogLeaderEpochState())
            if update.state is _FINISHED:
                state.handle_copy_finished(start, sid, end)
            elif update.state is _DELETE_STARTED:
                state.handle_delete_started(start, sid)
            else:
                state.handle_delete_finished(sid)
                if state.is_empty():
                    del self._epochs[epoch]
        if update.state is _DELETE_FINISHED:
            del self._segments[sid]
            del self._order[sid]
        else:
            self._segments[sid] = updated

    def update_partition_delete(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Kafka's ``RemotePartitionMetadataStore.handleRemotePartitionDeleteMetadata``:
        MARKED -> STARTED -> FINISHED; FINISHED forgets every segment."""
        if metadata.topic_id_partition != self.topic_id_partition:
            raise InvalidRemoteLogStateError(
                f"{metadata.topic_id_partition} is not {self.topic_id_partition}")
        if not RemotePartitionDeleteState.is_valid_transition(self._delete_state, metadata.state):
            current = None if self._delete_state is None else self._delete_state.name
            raise InvalidRemoteLogStateError(
                f"Current state: {current}, target state: {metadata.state.name} "
                f"of partition {self.topic_id_partition}")
        self._delete_state = metadata.state
        if metadata.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            self._segments.clear()
            self._order.clear()
            self._epochs.clear()

    @property
    def partition_delete_state(self) -> RemotePartitionDeleteState | None:
        return self._delete_state

    def remote_log_segment_metadata(self, leader_epoch: int,
                                    offset: int) -> RemoteLogSegmentMetadata | None:
        """Kafka's ``remoteLogSegmentMetadata(leaderEpoch, offset)``: the COPY_SEGMENT_FINISHED
        segment holding ``offset`` within ``leader_epoch``'s range of it, or None."""
        state = self._epochs.get(leader_epoch)
        sid = state.floor_id(offset) if state is not None else None
        metadata = self._segments.get(sid) if sid is not None else None
        if metadata is None or offset > metadata.end_offset:
            return None
        for epoch, _start, end in epoch_ranges(metadata):
            if epoch == leader_epoch:
                return metadata if offset <= end else None
        return None

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """Kafka's ``highestOffsetForEpoch``: the highest offset of ``leader_epoch`` in any
        COPY_SEGMENT_FINISHED segment so far (not lowered by deletes), or None."""
        state = self._epochs.get(leader_epoch)
        return state.highest_log_offset if state is not None else None

    def _sorted(self, metadata: Iterator[RemoteLogSegmentMetadata]
                ) -> list[RemoteLogSegmentMetadata]:
        return sorted(metadata, key=lambda m: (m.start_offset, m.event_timestamp_ms,
                                               self._order[m.remote_log_segment_id]))

    def list_remote_log_segments(self, leader_epoch: int | None = None
                                 ) -> Iterator[RemoteLogSegmentMetadata]:
        """The COPY_SEGMENT_FINISHED segments, by start offset; only those with records of
        ``leader_epoch`` when given. A copy superseded by a newer copy of its offsets is
        still listed (retention must see and delete it) though lookups no longer find it."""
        return (m for m in self.list_all(leader_epoch) if m.state is _FINISHED)

    def list_all(self, leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment not yet DELETE_SEGMENT_FINISHED, in any state (COPY_SEGMENT_STARTED
        ones are uploads that may have been cut; COPY_SEGMENT_FINISHED ones superseded by a
        newer copy of their offsets are no longer readable but still to delete), by start
        offset then event time; only those with records of ``leader_epoch`` when given
        (Kafka's ``listRemoteLogSegments(leaderEpoch)``)."""
        if leader_epoch is None:
            return iter(self._sorted(iter(self._segments.values())))
        state = self._epochs.get(leader_epoch)
        if state is None:
            return iter(())
        ids = set(state.offset_to_id.values()) | state.unreferenced_segment_ids
        return iter(self._sorted(self._segments[sid] for sid in ids))

    def with_txn_index_after(self, offset: int) -> list[RemoteLogSegmentMetadata]:
        """The COPY_SEGMENT_FINISHED segments starting after ``offset`` whose transaction
        index is not empty (KIP-1058's ``txnIndexEmpty``), by start offset: one pass over
        the segments, sorting only those found (Kafka's ``nextSegmentWithTxnIndex``
        candidates; the caller keeps those of its lineage)."""
        found = (m for m in self._segments.values()
                 if m.state is _FINISHED and not m.txn_index_empty and m.start_offset > offset)
        return self._sorted(found)

    def segment(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The current metadata of ``segment_id`` (any state), or None."""
        return self._segments.get(segment_id)
