"""Segment file helpers of a log: deleting segments, fsyncing them with their dir, and which
segments a flush covers."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tidelog.metrics.histogram import LOG_FLUSH_STATS

from .segment import LogSegment
from .segments import LogSegments

log = logging.getLogger(__name__)


def delete_all(segs: list[LogSegment]) -> None:
    for seg in segs:
        try:
            seg.delete()
        except OSError:
            log.warning("Failed to delete %s", seg, exc_info=True)


def sync(segs: list[LogSegment], dir: Path | None) -> None:
    with LOG_FLUSH_STATS.time():  # Kafka times only flushes that write something
        for seg in segs:
            seg.flush()
        if dir is not None:
            fsync_dir(dir)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_plan(segments: LogSegments, end: int, recovery_point: int, offset: int | None
               ) -> tuple[int, list[LogSegment], bool] | None:
    """Flushing a log to ``offset`` (Kafka's UnifiedLog.flush): (target, segments holding
    [recovery point, target) to fsync, whether the dir needs it too); None: nothing to do."""
    target = end if offset is None else min(offset, end)
    if target <= recovery_point:
        return None
    segs = segments.values(recovery_point, target)
    active = segments.active_segment
    if target == end and active not in segs:
        segs.append(active)
    # Kafka's LocalLog.flush: the dir only when a segment was created since the last flush
    return target, segs, any(seg.base_offset >= recovery_point for seg in segs)
