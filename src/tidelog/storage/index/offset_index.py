"""OffsetIndex (`.index`): 8-byte entries (int32 relative offset, int32 file position).

Sparse and strictly increasing by offset; ``lookup`` gives the largest entry <= target,
which is where a read or search starts scanning the `.log` (Kafka's OffsetIndex).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptIndexError, InvalidOffsetError
from .abstract_index import AbstractIndex

_ENTRY = struct.Struct(">ii")
_I32 = struct.Struct(">i")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    __slots__ = ("_last_offset",)
    entry_size = 8

    def _on_loaded(self) -> None:
        self._last_offset = self._compute_last_offset()

    def _compute_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._relative_offset_at(self._entries - 1)

    def _relative_offset_at(self, slot: int) -> int:
        return int(_I32.unpack_from(self._mmap, slot * 8)[0])

    def _position_at(self, slot: int) -> int:
        return int(_I32.unpack_from(self._mmap, slot * 8 + 4)[0])

    def _parse(self, slot: int) -> OffsetPosition:
        rel, pos = _ENTRY.unpack_from(self._mmap, slot * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset if empty."""
        self._ensure_loaded()
        return self._last_offset

    def last_entry(self) -> OffsetPosition:
        self._ensure_loaded()
        with self._lock:
            if self._entries == 0:
                return OffsetPosition(self.base_offset, 0)
            return self._parse(self._entries - 1)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, else (base_offset, 0)."""
        self._ensure_loaded()
        with self._lock:
            slot = self._slot_for_offset(target_offset - self.base_offset)
            if slot < 0:
                return OffsetPosition(self.base_offset, 0)
            return self._parse(slot)

    def valid_entries(self) -> tuple[bytearray, int]:
        """The buffer of entries as kept (8 bytes each) and how many are valid from its
        start, for a native lookup that reads them at once under the GIL
        (FileRecords.find_batch): not to be kept or changed."""
        self._ensure_loaded()
        return self._mmap, self._entries

    def _slot_for_offset(self, target: int) -> int:
        """The hot path of every fetch: the binary search inlined (no key callbacks)."""
        n, mm, unpack = self._entries, self._mmap, _I32.unpack_from
        if n == 0 or unpack(mm, 0)[0] > target:
            return -1
        if unpack(mm, (n - 1) << 3)[0] <= target:
            return n - 1  # caught-up consumers read past the last entry: no search
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid << 3)[0] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def entry(self, n: int) -> OffsetPosition:
        self._ensure_loaded()
        with self._lock:
            if n < 0 or n >= self._entries:
                raise ValueError(
                    f"Attempt to fetch the {n}th entry from index {self._path}, which has size "
                    f"{self._entries}."
                )
            return self._parse(n)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> OffsetPosition | None:
        """First entry whose position is >= fetch_offset.position + fetch_size, else None."""
        self._ensure_loaded()
        with self._lock:
            slot = self._smallest_upper_bound(fetch_offset.position + fetch_size, self._position_at)
            return None if slot < 0 else self._parse(slot)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must strictly increase and the index not be full."""
        self._ensure_loaded()
        with self._lock:
            if self._entries >= self._max_entries:
                raise ValueError(
                    f"Attempt to append to a full index (size = {self._entries}) {self._path}."
                )
            if self._entries != 0 and offset <= self._last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) to position {self._entries} no "
                    f"larger than the last offset appended ({self._last_offset}) to {self._path}."
                )
            rel = self.relative_offset(offset)
            self._write_entry(_ENTRY.pack(rel, position))
            self._last_offset = offset

    def append_packed(self, entries: bytes, last_offset: int) -> None:
        """Append packed entries ending at ``last_offset`` that the caller checked as
        ``append`` would (the recovery scan's fast path)."""
        if entries:
            self._ensure_loaded()
            with self._lock:
                self._write_entries(entries)
                self._last_offset = last_offset

    def sanity_check(self) -> None:
        self._ensure_loaded()
        if self._entries != 0 and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self._path}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset "
                f"{self.base_offset}."
            )
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self._path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.entry_size}."
            )
