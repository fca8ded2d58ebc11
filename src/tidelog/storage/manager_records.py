"""The LogManager's operations on a log's records: DeleteRecords (Kafka's
ReplicaManager.deleteRecords on the log) and the followers' truncation (Kafka's
LogManager.truncateTo and truncateFullyAndStartAt), with the cleaner paused on a partition
whose cleaned range a truncation rewrites. Mixed into LogManager."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tidelog.storage.dir_lock import LogDir
from tidelog.storage.errors import OffsetOutOfRangeError, StorageError
from tidelog.storage.log import Log
from tidelog.storage.manager_tasks import LogManagerTasks
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger("tidelog.storage.manager")


class PolicyViolationError(StorageError):
    """DeleteRecords on a log whose cleanup.policy lacks ``delete`` (Kafka refuses it)."""

    kafka_error = "POLICY_VIOLATION"


class LogManagerRecords(LogManagerTasks):
    """DeleteRecords and truncation; mixed into LogManager (whose state it works on)."""

    def get_log(self, tp: TopicPartition) -> Log | None:
        raise NotImplementedError

    def _require_log(self, tp: TopicPartition) -> Log:
        raise NotImplementedError

    def _log_dir_of(self, path: Path) -> LogDir:
        raise NotImplementedError

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Advance the log start offset to ``offset`` (-1 = the high watermark).

        Bounded by the high watermark (OffsetOutOfRange above it, like Kafka); an offset at or
        below the current log start offset changes nothing. Returns the new log start offset.
        """
        lg = self._require_log(tp)
        if not lg.config.delete:
            raise PolicyViolationError(
                f"Records of partition {tp} can not be deleted due to the configured policy"
            )
        target = lg.high_watermark if offset == -1 else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"Cannot delete records of {tp} before offset {offset}")
        if target > lg.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset of {tp} to {target}: it is above the "
                f"high watermark {lg.high_watermark}"
            )
        lg.maybe_increment_log_start_offset(target, "client delete records")
        return int(lg.log_start_offset)

    def truncate_to(self, partition_offsets: Mapping[TopicPartition, int]) -> None:
        """Truncate each log to its offset (followers); checkpoint the affected dirs."""
        affected: set[Path] = set()
        for tp, offset in partition_offsets.items():
            lg = self.get_log(tp)
            if lg is None:
                log.warning("Not truncating %s to %d: no log on this broker", tp, offset)
                continue  # like Kafka: partitions this broker does not host are skipped
            # Truncating below the active segment rewrites what the cleaner may be reading.
            pause = offset < lg.segments.active_segment.base_offset
            with self._cleaning_paused(tp, pause):
                if lg.truncate_to(offset):
                    affected.add(Path(lg.dir).parent)
                if pause:
                    self._truncate_cleaner_checkpoint(lg, tp)
        for parent in affected:
            self._checkpoint_recovery_points(self._log_dir_of(parent))

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        lg = self._require_log(tp)
        with self._cleaning_paused(tp, True):
            lg.truncate_fully_and_start_at(offset)
            self._truncate_cleaner_checkpoint(lg, tp)
        parent = Path(lg.dir).parent
        self._checkpoint_dir(self._log_dir_of(parent), self._logs_in_dir(parent))

    @contextmanager
    def _cleaning_paused(self, tp: TopicPartition, pause: bool) -> Iterator[None]:
        """Abort and pause the cleaner on ``tp`` for the block (Kafka's truncateTo)."""
        if not pause or self.cleaner is None:
            yield
            return
        self.cleaner.abort_and_pause_cleaning(tp)
        try:
            yield
        finally:
            self.cleaner.resume_cleaning([tp])

    def _truncate_cleaner_checkpoint(self, lg: Log, tp: TopicPartition) -> None:
        if self.cleaner is not None:
            base = lg.segments.active_segment.base_offset
            self.cleaner.maybe_truncate_checkpoint(Path(lg.dir).parent, tp, base)
