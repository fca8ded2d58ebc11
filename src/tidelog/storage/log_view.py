"""LocalLogView: the accessors a Log answers from its ``LocalLog`` alone (Kafka's UnifiedLog
delegating ``dir``, ``config``, ``logEndOffset``, ``recoveryPoint``, ``activeSegment``... to
its LocalLog). ``Log`` (log.py) is one; what needs the Log's own state (log start offset,
high watermark, producer state, the lock) stays there.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler
from tidelog.util.topic_partition import TopicPartition

from .local_log import LocalLog
from .segment import LogOffsetMetadata, LogSegment
from .segments import LogSegments

_STAMP = struct.Struct("=q")


class LocalLogView:
    """Read-only accessors over ``self._local`` (plus the scheduler's setter), and the Log's
    ``state_stamp`` with the cell it is mirrored into."""

    # where ``state_stamp`` is mirrored as it moves: a buffer and the byte offset of a native
    # int64 in it (a reader's table of many logs, compared there without touching each Log);
    # None: nowhere. Set and read under the Log's lock, as the stamp moves.
    stamp_cell: tuple[bytearray, int] | None = None
    _state_stamp = 0

    def __init__(self, local: LocalLog) -> None:
        self._local = local
        self.stamp_cell = None  # (an instance attribute: 3.11 reads a class one generically)

    @property
    def state_stamp(self) -> int:
        """Moves (under the Log's lock) whenever what a read at the high watermark answers
        may have changed (log.py); never back, so a value once seen names one state."""
        return self._state_stamp

    @state_stamp.setter
    def state_stamp(self, value: int) -> None:
        self._state_stamp = value
        cell = self.stamp_cell
        if cell is not None:
            _STAMP.pack_into(cell[0], cell[1], value)

    def flush_due(self) -> bool:
        """Kafka's check in UnifiedLog.append: the unflushed messages reached
        ``flush.messages`` (one call: the broker asks after every append)."""
        local = self._local
        return local.end_metadata.message_offset - local.recovery_point >= \
            local.config.flush_messages

    def mirror_stamp(self, cell: tuple[bytearray, int] | None) -> None:
        """Mirror ``state_stamp`` into ``cell`` from now on (its value written now), or
        nowhere (None). The caller holds the Log's lock."""
        self.stamp_cell = cell
        if cell is not None:
            _STAMP.pack_into(cell[0], cell[1], self._state_stamp)

    @property
    def local_log(self) -> LocalLog:
        return self._local

    @property
    def dir(self) -> Path:
        return self._local.dir

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
