"""Flushing a log (Kafka's UnifiedLog.flush): which segments hold [recovery point, offset),
and the group commit's flush with its fsyncs outside the log's lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import KafkaStorageError, StorageError
from .log_files import sync
from .segment import LogSegment

if TYPE_CHECKING:
    from .log import Log


def flush_plan(lg: Log, offset: int | None) -> tuple[int, list[LogSegment], bool] | None:
    """(target, segments to fsync, whether the dir needs it too); None: nothing to do."""
    end = lg.log_end_offset
    target = end if offset is None else min(offset, end)
    point = lg.recovery_point
    if target <= point:
        return None
    segs = lg.segments.values(point, target)
    active = lg.segments.active_segment
    if target == end and active not in segs:
        segs.append(active)
    # Kafka's LocalLog.flush: the dir only when a segment was created since the last flush
    return target, segs, any(seg.base_offset >= point for seg in segs)


def flush_outside_lock(lg: Log, offset: int) -> None:
    """``Log.flush`` with the fsyncs outside the log's lock, as Kafka's UnifiedLog.flush (the
    lock only lists the segments and marks the recovery point): appends go on while the disk
    flushes. Raises KafkaStorageError on a failed fsync, or if the log was closed meanwhile
    (its records are then not known to be on disk: never acknowledge them)."""
    with lg._io("flush"):
        lg._check_open()
        plan = flush_plan(lg, offset)
    if plan is None:
        return
    try:
        sync(plan[1], lg.dir if plan[2] else None)
    except (OSError, StorageError) as e:
        with lg._lock:
            closed = lg._closed
        if closed:  # closed under us (deleted, dir offline): not a disk error of its own
            raise KafkaStorageError(f"The log for {lg.name} was closed during its flush") \
                from None
        raise KafkaStorageError(f"Error while flush in dir {lg.dir} ({lg.name}): {e}") from e
    with lg._lock:
        lg._check_open()
        lg._mark_flushed(plan[0])
