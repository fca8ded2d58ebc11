"""Remote retention at a leader (Kafka's RLMExpirationTask.cleanupExpiredRemoteLogSegments).

Only the segments of the leader's epoch lineage count (Kafka's
``isRemoteSegmentWithinLeaderEpochs``): walking the lineage's epochs oldest first, a segment
wholly below the log start offset (DeleteRecords) goes; a segment within the lineage goes
when ``retention.ms`` is past its largest timestamp or while ``retention.bytes`` is breached
(the total: the local segments not yet in remote storage plus the lineage's remote ones);
the walk stops at the first lineage segment kept. A segment of the lineage's epochs that is
not within it (uploaded by a leader whose later records were truncated away) is neither
counted nor expired by time or size. The log start offset then moves to the end of the last
expired segment + 1, and the segments are deleted.

After that, every remote segment whose epochs all precede the earliest epoch the leader
still knows (its epoch cache is truncated at the log start) is unreferenced and deleted, as
Kafka's deleteLogSegmentsDueToLeaderEpochCacheTruncation: that is how a diverged segment
goes once the lineage has moved past it.

Dangling segments are deleted first: a COPY_SEGMENT_STARTED that this broker is not copying
now (an upload cut by a crash or by a leader change: never counted, never read) and a
DELETE_SEGMENT_STARTED (a delete cut short, by an error or a restart).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache

from .remote_log_segments import is_remote_segment_within_leader_epochs, lineage

if TYPE_CHECKING:
    from tidelog.metrics.remote import RemoteLogMetrics
    from tidelog.storage.remote.metadata import RemoteLogSegmentId, TopicIdPartition
    from tidelog.util.clock import Clock

    from .remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager


class RLMTask(Protocol):
    """What expiration reads of a partition's task (the RemoteLogManager's RLMTask)."""

    @property
    def tip(self) -> TopicIdPartition: ...

    @property
    def being_copied(self) -> set[RemoteLogSegmentId]: ...


class RemoteLogManager(Protocol):
    """What expiration uses of the RemoteLogManager."""

    @property
    def rlmm(self) -> TopicBasedRemoteLogMetadataManager: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def metrics(self) -> RemoteLogMetrics: ...

    async def delete_remote_log_segment(self, metadata: RemoteLogSegmentMetadata) -> None: ...

    def raise_log_start(self, lg: Log, offset: int, reason: str) -> None: ...


log = logging.getLogger(__name__)
_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DANGLING = (RemoteLogSegmentState.COPY_SEGMENT_STARTED,
             RemoteLogSegmentState.DELETE_SEGMENT_STARTED)


@dataclass
class RetentionHandler:
    """Kafka's RemoteLogRetentionHandler: the breached size left and the new log start."""

    cleanup_until_ms: int | None
    breached: int
    log_start_offset: int | None = None
    expired: list[RemoteLogSegmentMetadata] = field(default_factory=list)

    def _expire(self, m: RemoteLogSegmentMetadata) -> None:
        self.expired.append(m)
        self.log_start_offset = max(self.log_start_offset or 0, m.end_offset + 1)

    def by_time(self, m: RemoteLogSegmentMetadata) -> bool:
        if self.cleanup_until_ms is None or m.max_timestamp_ms > self.cleanup_until_ms:
            return False
        self.breached = max(0, self.breached - m.segment_size_in_bytes)
        self._expire(m)
        return True

    def by_size(self, m: RemoteLogSegmentMetadata) -> bool:
        if self.breached <= 0 or self.breached - m.segment_size_in_bytes < 0:
            return False
        self.breached -= m.segment_size_in_bytes
        self._expire(m)
        return True


async def cleanup_expired_remote_log_segments(rlm: RemoteLogManager, task: RLMTask,
                                              lg: Log) -> None:
    cache = rlm.rlmm.catch_up_for(task.tip)
    dangling = [m for m in cache.list_all()
                if m.state in _DANGLING and m.remote_log_segment_id not in task.being_copied]
    for metadata in dangling:
        log.info("deleting dangling remote segment %s (%s)", metadata.remote_log_segment_id,
                 metadata.state.name)
        await rlm.delete_remote_log_segment(metadata)
    handler, below_start = _expired(rlm, lg, cache)
    if handler.log_start_offset is not None:  # Kafka moves it before deleting
        rlm.raise_log_start(lg, handler.log_start_offset, "remote segment deletion")
    for metadata in [*below_start, *handler.expired]:
        await rlm.delete_remote_log_segment(metadata)
    await _delete_unreferenced(rlm, lg, cache)
    kept = list(cache.list_remote_log_segments())
    tp = task.tip
    rlm.metrics.set_gauge("remote_log_size_bytes", tp.topic, tp.partition,
                          sum(m.segment_size_in_bytes for m in kept))
    rlm.metrics.set_gauge("remote_log_metadata_count", tp.topic, tp.partition, len(kept))


def _expired(rlm: RemoteLogManager, lg: Log, cache: RemoteLogMetadataCache
             ) -> tuple[RetentionHandler, list[RemoteLogSegmentMetadata]]:
    """The segments to delete, walking the lineage's epochs oldest first: those below the
    log start, then those past retention (the handler's, with the new log start)."""
    epochs = lineage(lg)
    handler = RetentionHandler(_cleanup_until(rlm, lg), _breached_size(lg, cache, epochs))
    below_start: list[RemoteLogSegmentMetadata] = []
    first_epoch = min(epochs)
    seen: set[object] = set()
    for epoch in sorted(epochs):
        for m in cache.list_all(epoch):
            if m.remote_log_segment_id in seen or m.state is not _FINISHED:
                continue
            seen.add(m.remote_log_segment_id)
            if max(m.segment_leader_epochs) <= first_epoch and \
                    m.end_offset < lg.log_start_offset:
                below_start.append(m)
                continue
            if not is_remote_segment_within_leader_epochs(m, lg.log_end_offset, epochs):
                continue  # not this lineage's: neither counted nor expired
            if not (handler.by_time(m) or handler.by_size(m)):
                return handler, below_start  # the first segment kept
    return handler, below_start


def _cleanup_until(rlm: RemoteLogManager, lg: Log) -> int | None:
    retention_ms = lg.config.retention_ms
    return rlm.clock.milliseconds() - retention_ms if retention_ms > -1 else None


def _breached_size(lg: Log, cache: RemoteLogMetadataCache, epochs: dict[int, int]) -> int:
    """Kafka's buildRetentionSizeData: the local segments not in remote storage plus the
    lineage's COPY_SEGMENT_FINISHED segments, over ``retention.bytes`` (0: not breached)."""
    limit = lg.config.retention_bytes
    if limit <= -1:
        return 0
    remote: dict[object, int] = {}
    for epoch in epochs:
        for m in cache.list_remote_log_segments(epoch):
            if is_remote_segment_within_leader_epochs(m, lg.log_end_offset, epochs):
                remote[m.remote_log_segment_id] = m.segment_size_in_bytes
    return max(0, only_local_size(lg) + sum(remote.values()) - limit)


async def _delete_unreferenced(rlm: RemoteLogManager, lg: Log,
                               cache: RemoteLogMetadataCache) -> None:
    """Segments whose epochs all precede the leader's earliest known epoch."""
    earliest = lg.leader_epoch_cache.earliest_entry()
    if earliest is None:
        return
    for m in list(cache.list_all()):
        if m.state is _FINISHED and max(m.segment_leader_epochs) < earliest.epoch:
            log.info("deleting remote segment %s: its epochs %s precede the earliest leader "
                     "epoch %d of %s", m.remote_log_segment_id, sorted(m.segment_leader_epochs),
                     earliest.epoch, lg.name)
            await rlm.delete_remote_log_segment(m)


def only_local_size(lg: Log) -> int:
    """Kafka's onlyLocalLogSegmentsSize: local segments from the highest copied offset on."""
    copied = lg.highest_offset_in_remote_storage
    return sum(s.size for s in lg.segments.values() if s.base_offset >= copied)
