"""Swapping a cleaned segment into a Log (Kafka's LocalLog.replaceSegments), crash-safely.

The suffix state machine (#97, #138), each step made durable by a directory fsync:

1. the new segment was written as ``<base>.log.cleaned`` (+ indexes) and flushed;
2. rename it ``.cleaned`` -> ``.swap``: from here a restart completes the swap;
3. put it into the segment map; rename each replaced segment ``""`` -> ``.deleted``;
4. rename the new segment ``.swap`` -> ``""``;
5. delete the ``.deleted`` files after ``file.delete.delay.ms`` (open readers keep working).

A crash before 2 leaves the old segments plus a ``.cleaned`` file the loader deletes; a crash
after 2 leaves a ``.swap`` file, which the loader completes by deleting every regular segment
file in its offset range and dropping the suffix.

The Log has no ``replace_segments`` hook yet, so this works on its public segment map under
the Log's lock (the same lock retention and truncation take).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..log_file_utils import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from ..segment import LogSegment
from .errors import SwapAbortedError

if TYPE_CHECKING:
    from ..log import Log

log = logging.getLogger(__name__)

# Test hook: called with a step name ("writing" while the `.cleaned` segment is being
# written, then "cleaned", "swap", "replacing", "replaced"); raising (or killing the
# process) there simulates a crash at that step.
FaultHook = Callable[[str], None]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def log_lock(lg: Log) -> Iterator[None]:
    """The Log's writer lock (public ``lock`` if it has one, else its private one)."""
    lock = getattr(lg, "lock", None) or getattr(lg, "_lock", None)
    if lock is None:
        yield
        return
    with lock:
        yield


def replace_segments(
    lg: Log, new_segment: LogSegment, old_segments: list[LogSegment],
    fault: FaultHook | None = None,
) -> list[LogSegment]:
    """Swap ``new_segment`` (suffix ``.cleaned``) in for ``old_segments``; returns the old
    segments now renamed ``.deleted`` (their files are removed later)."""
    hook = fault or (lambda _step: None)
    directory = Path(lg.dir)
    with log_lock(lg):
        existing = lg.segments
        for seg in old_segments:
            if existing.get(seg.base_offset) is not seg:
                raise SwapAbortedError(
                    f"segment {seg.base_offset} of {lg.dir} changed while it was being cleaned")
        hook("cleaned")
        new_segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        fsync_dir(directory)
        hook("swap")
        existing.add(new_segment)
        for i, seg in enumerate(sorted(old_segments, key=lambda s: s.base_offset)):
            if seg.base_offset != new_segment.base_offset:
                existing.remove(seg.base_offset)
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            if i == 0:
                hook("replacing")  # half-way: some old segments renamed, the .swap still there
        fsync_dir(directory)
        hook("replaced")
        new_segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        fsync_dir(directory)
        _delete_replaced_snapshots(lg, new_segment, old_segments)
    _schedule_delete(lg, old_segments)
    return old_segments


def _delete_replaced_snapshots(lg: Log, new_segment: LogSegment, old: list[LogSegment]) -> None:
    psm = getattr(lg, "producer_state", None)
    if psm is None:
        return
    for seg in old:
        if seg.base_offset != new_segment.base_offset:
            psm.remove_and_delete_snapshot(seg.base_offset)


def _delete_files(segments: list[LogSegment]) -> None:
    for seg in segments:
        try:
            seg.delete()
        except OSError:
            log.warning("Failed to delete %s", seg, exc_info=True)


def _schedule_delete(lg: Log, segments: list[LogSegment]) -> None:
    scheduler = getattr(lg, "scheduler", None)
    if scheduler is None:
        _delete_files(segments)
        return
    scheduler.schedule("delete-file", lambda: _delete_files(segments),
                       lg.config.file_delete_delay_ms)


def delete_cleaned_files(directory: Path, base_offset: int) -> None:
    """Remove leftovers of an earlier attempt at this base (Kafka's createNewCleanedSegment)."""
    prefix = f"{base_offset:020d}"
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        (directory / f"{prefix}{ext}{CLEANED_FILE_SUFFIX}").unlink(missing_ok=True)
