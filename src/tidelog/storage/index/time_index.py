"""TimeIndex (`.timeindex`): 12-byte entries (int64 timestamp, int32 relative offset).

Entry (T, O): T is the largest timestamp seen up to and including the batch holding O; both
columns are non-decreasing, and an entry is added only when the timestamp grows. One slot is
kept free so the final entry can always be written when the segment is rolled or closed.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptIndexError, InvalidOffsetError
from .abstract_index import AbstractIndex

_ENTRY = struct.Struct(">qi")
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    __slots__ = ("_last_entry",)
    entry_size = 12

    def _on_loaded(self) -> None:
        self._last_entry = self._compute_last_entry()

    def _compute_last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._parse(self._entries - 1)

    def _timestamp_at(self, slot: int) -> int:
        return int(_Q.unpack_from(self._mmap, slot * 12)[0])

    def _relative_offset_at(self, slot: int) -> int:
        return int(_I32.unpack_from(self._mmap, slot * 12 + 8)[0])

    def _parse(self, slot: int) -> TimestampOffset:
        ts, rel = _ENTRY.unpack_from(self._mmap, slot * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def is_full(self) -> bool:
        self._ensure_loaded()
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base_offset) if empty."""
        self._ensure_loaded()
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        self._ensure_loaded()
        with self._lock:
            if n < 0 or n >= self._entries:
                raise ValueError(
                    f"Attempt to fetch the {n}th entry from time index {self._path} which has "
                    f"size {self._entries}."
                )
            return self._parse(n)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Entry with the largest timestamp <= target, else (-1, base_offset)."""
        self._ensure_loaded()
        with self._lock:
            slot = self._largest_lower_bound(target_timestamp, self._timestamp_at)
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            return self._parse(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is above the last one."""
        self._ensure_loaded()
        with self._lock:
            if not skip_full_check and self.is_full():
                raise ValueError(
                    f"Attempt to append to a full time index (size = {self._entries}) {self._path}."
                )
            last = self._last_entry
            if self._entries != 0 and offset < last.offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to slot {self._entries} no larger "
                    f"than the last offset appended ({last.offset}) to {self._path}."
                )
            if self._entries != 0 and timestamp < last.timestamp:
                raise RuntimeError(
                    f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no "
                    f"larger than the last timestamp appended ({last.timestamp}) to {self._path}."
                )
            if timestamp <= last.timestamp:
                return  # equal timestamps add nothing: the earlier entry already covers them
            if self._entries >= self._max_entries:
                raise ValueError(f"Time index {self._path} has no free slot.")
            rel = self.relative_offset(offset)
            self._write_entry(_ENTRY.pack(timestamp, rel))
            self._last_entry = TimestampOffset(timestamp, offset)

    def append_packed(self, entries: bytes, last_entry: TimestampOffset) -> None:
        """Append packed entries ending at ``last_entry`` that the caller checked as
        ``maybe_append`` would (the recovery scan's fast path)."""
        if entries:
            self._ensure_loaded()
            with self._lock:
                self._write_entries(entries)
                self._last_entry = last_entry

    def sanity_check(self) -> None:
        self._ensure_loaded()
        last = self._last_entry
        if self._entries != 0:
            first_ts = self._timestamp_at(0)
            if last.timestamp < first_ts:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last timestamp is {last.timestamp} which is less than the "
                    f"first timestamp {first_ts}"
                )
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self._path}) has non-zero "
                    f"size but the last offset is {last.offset} which is less than the base "
                    f"offset {self.base_offset}"
                )
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Time index file {self._path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.entry_size}."
            )
