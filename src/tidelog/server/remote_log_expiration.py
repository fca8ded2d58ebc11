"""Remote retention at a leader (Kafka's RLMExpirationTask.cleanupExpiredRemoteLogSegments).

Total retention is over local + remote: ``retention.ms`` deletes remote segments whose
largest timestamp is older, ``retention.bytes`` deletes the oldest while the local segments
not in remote storage plus the remote ones exceed it, and a log start offset raised by
DeleteRecords deletes the segments wholly below it; oldest first, stopping at the first
segment kept. The log start offset then moves to the end of the last deleted segment + 1.

Dangling segments are deleted first: a COPY_SEGMENT_STARTED that this broker is not copying
now (an upload cut by a crash or by a leader change: never counted, never read) and a
DELETE_SEGMENT_STARTED (a delete cut short).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, RemoteLogSegmentState

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
_DANGLING = (RemoteLogSegmentState.COPY_SEGMENT_STARTED,
             RemoteLogSegmentState.DELETE_SEGMENT_STARTED)


async def cleanup_expired_remote_log_segments(rlm: RemoteLogManager, task: RLMTask,
                                              lg: Log) -> None:
    cache = rlm.rlmm.catch_up_for(task.tip)
    dangling = [m for m in cache.list_all()
                if m.state in _DANGLING and m.remote_log_segment_id not in task.being_copied]
    for metadata in dangling:
        log.info("deleting dangling remote segment %s (%s)", metadata.remote_log_segment_id,
                 metadata.state.name)
        await rlm.delete_remote_log_segment(metadata)
    segments = sorted(cache.list_remote_log_segments(), key=lambda m: m.start_offset)
    expired, new_start = _expired(rlm, lg, segments)
    for metadata in expired:
        await rlm.delete_remote_log_segment(metadata)
    if new_start is not None:
        rlm.raise_log_start(lg, new_start, "remote segment deletion")
    kept = [m for m in segments if m not in expired]
    tp = task.tip
    rlm.metrics.set_gauge("remote_log_size_bytes", tp.topic, tp.partition,
                          sum(m.segment_size_in_bytes for m in kept))
    rlm.metrics.set_gauge("remote_log_metadata_count", tp.topic, tp.partition, len(kept))


def _expired(rlm: RemoteLogManager, lg: Log, segments: list[RemoteLogSegmentMetadata]
             ) -> tuple[list[RemoteLogSegmentMetadata], int | None]:
    """The segments to delete, oldest first, and the log start offset after them."""
    config = lg.config
    now = rlm.clock.milliseconds()
    cleanup_until = now - config.retention_ms if config.retention_ms > -1 else None
    breached = 0
    if config.retention_bytes > -1:
        total = only_local_size(lg) + sum(m.segment_size_in_bytes for m in segments)
        breached = max(0, total - config.retention_bytes)
    out: list[RemoteLogSegmentMetadata] = []
    new_start: int | None = None
    for m in segments:
        below_start = m.end_offset < lg.log_start_offset
        by_time = cleanup_until is not None and m.max_timestamp_ms <= cleanup_until
        by_size = breached > 0 and breached - m.segment_size_in_bytes >= 0
        if not (below_start or by_time or by_size):
            break
        breached = max(0, breached - m.segment_size_in_bytes)
        out.append(m)
        if not below_start:
            new_start = max(new_start or 0, m.end_offset + 1)
    return out, new_start


def only_local_size(lg: Log) -> int:
    """Kafka's onlyLocalLogSegmentsSize: local segments from the highest copied offset on."""
    copied = lg.highest_offset_in_remote_storage
    return sum(s.size for s in lg.segments.values() if s.base_offset >= copied)
