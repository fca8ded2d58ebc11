"""Retention (Kafka's UnifiedLog.deleteOldSegments): start-offset breach, size, then time.

A segment is deletable only while the high watermark has passed its upper bound (the next
segment's base, or the LEO for the last one), and — for size and time retention — while the
log's ``retention_floor`` (the lowest offset a reader outside the log still needs, such as
an Iceberg topic's translation) has passed it too; the walk stops at the first segment that
is not deletable. Deleting every segment first rolls a new empty one at the LEO (#79).

With tiered storage (``remote.storage.enable``) this is local retention: ``local.retention.*``
apply, a segment goes only once it is in remote storage (its last offset at most
``Log.highest_offset_in_remote_storage``, which the RemoteLogManager moves after each copy)
or below a log start offset DeleteRecords raised, and the log start offset stays (the
remote start; the RemoteLogManager moves it as remote segments expire).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tidelog.config.log_config import LogConfig
from tidelog.config.remote_log_config import local_retention_bytes, local_retention_ms
from tidelog.util.clock import Clock

from .local_log import LocalLog
from .producer_state import ProducerStateManager
from .segment import LogSegment
from .segments import LogSegments

Predicate = Callable[[LogSegment, "LogSegment | None"], bool]


class RetainedLog(Protocol):
    """What retention reads and calls of a log (a Log, under its lock)."""

    @property
    def config(self) -> LogConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def segments(self) -> LogSegments: ...

    @property
    def local_log(self) -> LocalLog: ...

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def local_log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def remote_log_enabled(self) -> bool: ...

    @property
    def highest_offset_in_remote_storage(self) -> int: ...

    @property
    def retention_floor(self) -> Callable[[], int | None] | None: ...

    def roll(self, expected_next_offset: int | None = None) -> LogSegment: ...

    def maybe_increment_log_start_offset(self, offset: int, reason: str = "") -> bool: ...


def delete_old_segments(lg: RetainedLog) -> int:
    """Apply the rules the cleanup policy allows (#78); returns the segments deleted."""
    n = _delete_log_start_offset_breached(lg)
    if lg.config.delete:
        n += _delete_retention_size_breached(lg)
        n += _delete_retention_ms_breached(lg)
    return n


def _delete_log_start_offset_breached(lg: RetainedLog) -> int:
    start = lg.local_log_start_offset if lg.remote_log_enabled else lg.log_start_offset
    return _delete(lg, lambda _s, nxt: nxt is not None and nxt.base_offset <= start,
                   f"log start offset {start} breach", keep_floor=False)


def _delete_retention_size_breached(lg: RetainedLog) -> int:
    limit = local_retention_bytes(lg.config) if lg.remote_log_enabled \
        else lg.config.retention_bytes
    size = lg.size_in_bytes
    if limit < 0 or size < limit:
        return 0
    diff = size - limit

    def breached(seg: LogSegment, _next: LogSegment | None) -> bool:
        nonlocal diff
        if diff - seg.size >= 0:
            diff -= seg.size
            return True
        return False

    return _delete(lg, breached, f"retention size {limit} breach")


def _delete_retention_ms_breached(lg: RetainedLog) -> int:
    retention = local_retention_ms(lg.config) if lg.remote_log_enabled \
        else lg.config.retention_ms
    if retention < 0:
        return 0
    now = lg.clock.milliseconds()
    return _delete(lg, lambda seg, _n: now - seg.largest_timestamp > retention,
                   f"retention time {retention}ms breach")


def deletable_segments(lg: RetainedLog, predicate: Predicate, *, keep_floor: bool = True
                       ) -> list[LogSegment]:
    """The oldest segments ``predicate`` allows, in order; with ``keep_floor``, none that
    holds an offset at or above the log's retention floor."""
    segs = lg.segments.values()
    out: list[LogSegment] = []
    hw = lg.high_watermark
    floor = lg.retention_floor() if keep_floor and lg.retention_floor is not None else None
    should_roll = False
    for i, seg in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt is not None else lg.log_end_offset
        last_and_empty = nxt is None and seg.size == 0
        if floor is not None and upper > floor:
            break
        if last_and_empty or hw < upper or not predicate(seg, nxt):
            break
        if lg.remote_log_enabled and not _tiered_or_below_start(lg, nxt, upper):
            # Kafka: an active segment past retention is rolled, so it is copied and goes
            should_roll = nxt is None
            break
        out.append(seg)
    if should_roll:
        lg.roll()
    return out


def _tiered_or_below_start(lg: RetainedLog, nxt: LogSegment | None, upper: int) -> bool:
    """Kafka's isSegmentEligibleForDeletion: copied to remote storage, or below the log
    start offset (DeleteRecords)."""
    if nxt is not None and lg.log_start_offset >= nxt.base_offset:
        return True
    return upper > 0 and upper - 1 <= lg.highest_offset_in_remote_storage


def _delete(lg: RetainedLog, predicate: Predicate, reason: str, keep_floor: bool = True) -> int:
    deletable = deletable_segments(lg, predicate, keep_floor=keep_floor)
    if not deletable:
        return 0
    to_delete = deletable
    if len(lg.segments) == len(deletable):
        new = lg.roll()
        if deletable[-1].base_offset == new.base_offset:
            to_delete = deletable[:-1]
    lg.local_log.remove_and_delete_segments(to_delete, reason)
    for seg in deletable:
        lg.producer_state.delete_snapshot_at(seg.base_offset)
    first = lg.segments.first_segment_base_offset
    if first is not None and not lg.remote_log_enabled:
        lg.maybe_increment_log_start_offset(first, reason)
    return len(deletable)
