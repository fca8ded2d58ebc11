"""Segment file helpers of a log: deleting segments and fsyncing them with their dir."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tidelog.metrics.histogram import LOG_FLUSH_STATS

from .segment import LogSegment

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
