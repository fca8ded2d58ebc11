"""A follower's local log as the fetcher uses it (the UnifiedLog calls ReplicaFetcherThread
makes): a :class:`~tidelog.server.replication.fetcher.FollowerPartition` over a storage
``Log``. Appends keep the leader's offsets and epochs (``append_as_follower``); the high
watermark is the leader's capped at our log end offset (Kafka's maybeUpdateHighWatermark,
which may also lower it); the log start offset follows the leader's up (DeleteRecords and
retention on the leader reach the follower this way)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.storage.errors import UnexpectedAppendOffsetError

if TYPE_CHECKING:
    from tidelog.storage.log import Log
    from tidelog.storage.log_append import LogAppendInfo

UNDEFINED_EPOCH_OFFSET = -1


class LogFollowerPartition:
    def __init__(self, log: Log) -> None:
        self.log = log

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def latest_epoch(self) -> int | None:
        return self.log.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        found_epoch, end = self.log.end_offset_for_epoch(epoch)
        if end == UNDEFINED_EPOCH_OFFSET:
            return None
        return found_epoch, end

    def append_records_to_follower(self, records: bytes) -> LogAppendInfo:
        """Kafka's Partition.doAppendRecordsToFollowerOrFutureReplica: an empty log whose
        start (the leader's, after DeleteRecords) falls inside the first fetched batch
        starts over at that batch's base offset."""
        log = self.log
        try:
            return log.append_as_follower(records)
        except UnexpectedAppendOffsetError as e:
            end = log.log_end_offset
            if not (end == log.log_start_offset and e.first_offset < end <= e.last_offset):
                raise
            log.truncate_fully_and_start_at(e.first_offset)
            return log.append_as_follower(records)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def update_follower_high_watermark(self, high_watermark: int, log_start_offset: int) -> bool:
        log = self.log
        old = log.high_watermark
        new = log.update_high_watermark(min(high_watermark, log.log_end_offset))
        if log_start_offset > log.log_start_offset:
            log.maybe_increment_log_start_offset(min(log_start_offset, new), "leader offset")
        return new != old
