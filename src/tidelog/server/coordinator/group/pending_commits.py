"""Offset commits appended but not yet replicated (Kafka's GroupMetadata.pendingOffsetCommits).

In a cluster an OffsetCommit is an acks=all write to the group's ``__consumer_offsets``
partition. Kafka's GroupMetadataManager.storeOffsets stages the offsets
(``prepareOffsetCommit``) and applies them to the cache only in the append's callback, once
the ISR has the batch (``onOffsetCommitAppend``); a failed or timed-out append drops them
(``failPendingOffsetWrite``). So OffsetFetch never returns an offset whose commit the client
was told failed, or one that a new leader may not have.

``PendingCommits`` keeps each staged commit with the log offset after its batch; the
coordinator's wait for replication completes the commits up to the offset it waited for, in
log order: applied on success, dropped on an error. A resignation drops the partition's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from tidelog.server.coordinator.group.records import OffsetAndMetadata
from tidelog.util.topic_partition import TopicPartition


class HasOffsets(Protocol):
    offsets: dict[TopicPartition, OffsetAndMetadata]


@dataclass(frozen=True)
class PendingCommit:
    group: HasOffsets
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    end_offset: int  # the log offset after its batch


class PendingCommits:
    def __init__(self) -> None:
        self._by_partition: dict[int, list[PendingCommit]] = {}

    def add(self, partition: int, commit: PendingCommit) -> None:
        self._by_partition.setdefault(partition, []).append(commit)

    def complete(self, partition: int, up_to: int | None, applied: bool) -> int:
        """The commits of ``partition`` whose batches end at or before ``up_to`` (None: all)
        were replicated (``applied``: into their group's offsets, in log order) or failed
        (dropped). Returns how many were completed."""
        pending = self._by_partition.get(partition, [])
        done = [c for c in pending if up_to is None or c.end_offset <= up_to]
        if not done:
            return 0
        left = [c for c in pending if up_to is not None and c.end_offset > up_to]
        if left:
            self._by_partition[partition] = left
        else:
            del self._by_partition[partition]
        if applied:
            for c in sorted(done, key=lambda c: c.end_offset):
                c.group.offsets.update(c.offsets)
        return len(done)

    def has_pending(self, group: HasOffsets) -> bool:
        """Kafka's hasOffsets counts staged commits: such a group is not empty yet."""
        return any(c.group is group for cs in self._by_partition.values() for c in cs)

    def forget_partition(self, partition: int) -> None:
        """The partition's leadership is gone: its staged commits with it."""
        self._by_partition.pop(partition, None)

    def count(self, partition: int | None = None) -> int:
        if partition is not None:
            return len(self._by_partition.get(partition, []))
        return sum(len(v) for v in self._by_partition.values())
