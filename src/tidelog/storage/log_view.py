"""LocalLogView: the accessors a Log answers from its ``LocalLog`` alone (Kafka's UnifiedLog
delegating ``dir``, ``config``, ``logEndOffset``, ``recoveryPoint``, ``activeSegment``... to
its LocalLog). ``Log`` (log.py) is one; what needs the Log's own state (log start offset,
high watermark, producer state, the lock) stays there.
"""

from __future__ import annotations

from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler
from tidelog.util.topic_partition import TopicPartition

from .local_log import LocalLog
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments


class LocalLogView:
    """Read-only accessors over ``self._local`` (plus the scheduler's setter)."""

    def __init__(self, local: LocalLog) -> None:
        self._local = local

    @property
    def local_log(self) -> LocalLog:
        return self._local

    @property
    def dir(self) -> Path:
        return self._local.dir

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @property
    def segments(self) -> LogSegments:
        return self._local.segments

    @property
    def clock(self) -> Clock:
        return self._local.clock

    @property
    def scheduler(self) -> Scheduler | None:
        return self._local.scheduler

    @scheduler.setter
    def scheduler(self, scheduler: Scheduler | None) -> None:
        self._local.scheduler = scheduler

    @property
    def last_flush_time(self) -> int:
        return self._local.last_flush_time

    @property
    def topic_partition(self) -> TopicPartition | None:
        return self._local.topic_partition

    @property
    def log_end_offset(self) -> int:
        return self._local.end_metadata.message_offset  # (one call per read, not two)

    @property
    def remote_log_enabled(self) -> bool:
        """Tiered (``remote.storage.enable``; the broker refuses it unless its tiered
        storage is on): local retention waits for copies, the log start is the remote one."""
        return self._local.config.remote_storage_enable

    @property
    def closed(self) -> bool:
        return self._local.closed

    @property
    def next_offset(self) -> int:
        """Where the next append's offsets start: the LEO, or past the writes in flight."""
        return self._local.next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._local.log_end_offset_metadata

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self._local.segments.size_in_bytes

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments.active_segment

    def number_of_segments(self) -> int:
        return len(self._local.segments)

    def _check_open(self) -> None:
        self._local.check_open()
