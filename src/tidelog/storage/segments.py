"""LogSegments: a partition's segments keyed by base offset (Kafka's LogSegments).

A SortedDict gives Kafka's floor/lower/higher lookups in O(log n). Methods that return
several segments return lists (snapshots), so a reader iterating them is unaffected by a
concurrent roll or deletion.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from sortedcontainers import SortedDict

from .segment import LogSegment


class LogSegments:
    __slots__ = ("__weakref__", "_lock", "_segments", "last_segment")  # (read natively)

    def __init__(self) -> None:
        self._segments: SortedDict = SortedDict()
        self._lock = threading.RLock()
        # the last segment, kept by the mutators (a plain attribute: every append reads it)
        self.last_segment: LogSegment | None = None

    # -- mutation --------------------------------------------------------------------------
    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add (or replace the segment at the same base offset); returns the replaced one."""
        with self._lock:
            previous: LogSegment | None = self._segments.get(segment.base_offset)
            self._segments[segment.base_offset] = segment
            self.last_segment = self._segments.peekitem(-1)[1]
            return previous

    def remove(self, offset: int) -> LogSegment | None:
        with self._lock:
            removed: LogSegment | None = self._segments.pop(offset, None)
            self.last_segment = self._segments.peekitem(-1)[1] if self._segments else None
            return removed

    def clear(self) -> None:
        with self._lock:
            self._segments.clear()
            self.last_segment = None

    def close(self) -> None:
        for seg in self.values():
            seg.close()

    def close_handlers(self) -> None:
        for seg in self.values():
            seg.close_handlers()

    def flush(self) -> None:
        for seg in self.values():
            seg.flush()

    def update_parent_dir(self, parent: Path) -> None:
        for seg in self.values():
            seg.update_parent_dir(parent)

    # -- queries ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.values())

    def __contains__(self, offset: object) -> bool:
        return offset in self._segments

    @property
    def number_of_segments(self) -> int:
        return len(self._segments)

    def is_empty(self) -> bool:
        return not self._segments

    def contains(self, offset: int) -> bool:
        return offset in self._segments

    def get(self, offset: int) -> LogSegment | None:
        segment: LogSegment | None = self._segments.get(offset)
        return segment

    def base_offsets(self) -> list[int]:
        with self._lock:
            return list(self._segments.keys())

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """All segments; or those that may hold offsets in [from, to): from the floor segment
        of ``from_offset`` up to (excluding) the segment based at ``to_offset`` or above."""
        with self._lock:
            if from_offset is None and to_offset is None:
                return list(self._segments.values())
            lo = from_offset if from_offset is not None else None
            hi = to_offset
            if lo is not None and hi is not None:
                if lo == hi:
                    return []
                if hi < lo:
                    raise ValueError(
                        f"Invalid log segment range: requested segments from offset {lo} "
                        f"mapping to segments in a range whose end offset {hi} is smaller"
                    )
            if lo is not None:
                floor = self._floor_key(lo)
                lo = floor if floor is not None else None
            keys = self._segments.irange(lo, hi, inclusive=(True, False))
            return [self._segments[k] for k in keys]

    def non_active_log_segments_from(self, from_offset: int) -> list[LogSegment]:
        """Segments from the floor of ``from_offset``, excluding the active one."""
        active = self.last_segment
        if active is None:
            return []
        return self.values(from_offset, active.base_offset) if from_offset < active.base_offset else []

    def _floor_key(self, offset: int) -> int | None:
        i = self._segments.bisect_right(offset)
        return self._segments.keys()[i - 1] if i > 0 else None

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        with self._lock:
            k = self._floor_key(offset)
            return None if k is None else self._segments[k]

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset < ``offset``."""
        with self._lock:
            i = self._segments.bisect_left(offset)
            return self._segments.values()[i - 1] if i > 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        with self._lock:
            i = self._segments.bisect_right(offset)
            return self._segments.values()[i] if i < len(self._segments) else None

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """Segments with base offset > ``offset``."""
        with self._lock:
            i = self._segments.bisect_right(offset)
            return list(self._segments.values()[i:])

    @property
    def first_segment(self) -> LogSegment | None:
        with self._lock:
            return self._segments.peekitem(0)[1] if self._segments else None

    @property
    def active_segment(self) -> LogSegment:
        seg = self.last_segment
        if seg is None:
            raise LookupError("the log has no segments")
        return seg

    @property
    def first_segment_base_offset(self) -> int | None:
        seg = self.first_segment
        return None if seg is None else seg.base_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(seg.size for seg in self.values())

    def __repr__(self) -> str:
        return f"LogSegments({self.base_offsets()})"
