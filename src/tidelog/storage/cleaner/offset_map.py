"""SkimpyOffsetMap: Kafka's bounded-memory map from a key's MD5 hash to its latest offset.

The cleaner only needs "what is the latest offset of this key in the dirty range"; storing
the 16-byte digest instead of the key bounds memory to 24 bytes per slot (digest + int64
offset) whatever the key sizes. Slots live in one preallocated bytearray with open
addressing: the first probes read successive 4-byte windows of the digest, later ones step
linearly (Kafka's ``positionOf``). A slot whose 16 hash bytes are zero is empty; an MD5
digest of all zero bytes is not a practical concern (Kafka makes the same assumption).

The map is "full" for the cleaner at ``slots * load_factor`` entries; ``put`` itself only
refuses a new key when every slot is used. Two keys with the same digest would share an
entry (so the older key's records could be dropped); Kafka accepts that risk for MD5 and so
do we.
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from array import array
from typing import Any

from tidelog._native import core as _native_core

HASH_SIZE = 16  # MD5 digest
OFFSET_SIZE = 8
BYTES_PER_ENTRY = HASH_SIZE + OFFSET_SIZE

_Q = struct.Struct(">q")
_EMPTY_HASH = bytes(HASH_SIZE)
_EMPTY_ENTRY = bytes(BYTES_PER_ENTRY)
_md5 = hashlib.md5
_INT64 = 1 << 63


def _anonymous_map(size: int) -> mmap.mmap:
    """Private anonymous memory (so that MADV_DONTNEED zeroes it), lazily backed."""
    if hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS"):
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return mmap.mmap(-1, size)


class OffsetMapFullError(RuntimeError):
    """A new key was put into a map whose every slot is in use."""


class SkimpyOffsetMap:
    """Key hash -> latest offset, in ``memory`` bytes (``memory // 24`` slots)."""

    __slots__ = ("_bytes", "_entries", "_lookups", "_probes", "_slots", "_track_limit", "_used",
                 "latest_offset")

    # The native twin of put/get's slot work (tidelog._native), or None: pure Python.
    _native = _native_core

    def __init__(self, memory: int) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 1:
            raise ValueError(f"offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory}")
        self._slots = slots
        # An anonymous mapping, not a bytearray (which memsets every page at once): pages cost
        # memory only once touched, so a broker whose compacted logs hold few keys never pays
        # for the whole (default 128 MiB) buffer.
        self._bytes = _anonymous_map(slots * BYTES_PER_ENTRY)
        # Slots used, while few (bounded: 1/32 of the slot count, 8 bytes each), so that
        # clear() zeroes just those instead of touching every page of the buffer.
        self._used = array("q")
        self._track_limit = slots // 32
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self.latest_offset = -1

    # -- sizing ------------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        return self._slots

    @property
    def size(self) -> int:
        """Number of distinct key hashes stored."""
        return self._entries

    def __len__(self) -> int:
        return self._entries

    @property
    def utilization(self) -> float:
        return self._entries / self._slots

    @property
    def collision_rate(self) -> float:
        """Extra probes per lookup (Kafka's collisionRate), for stats."""
        return self._probes / self._lookups if self._lookups else 0.0

    def max_entries(self, load_factor: float) -> int:
        """Entries at which the cleaner treats the map as full (Kafka: slots * loadFactor)."""
        return int(self._slots * load_factor)

    # -- operations --------------------------------------------------------------------------
    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the latest for ``key``; also advances ``latest_offset``."""
        native = self._native
        if native is not None and -_INT64 <= offset < _INT64:  # beyond: the twin's error
            pos, found, probes = native.omap_put(self._bytes, self._slots, key, offset)
            self._lookups += 1
            self._probes += probes
            if pos < 0:
                raise OffsetMapFullError("attempt to add a new entry to a full offset map")
            if not found:
                self._entries += 1
                if self._entries <= self._track_limit:
                    self._used.append(pos)
            self.latest_offset = offset
            return
        digest = _md5(key, usedforsecurity=False).digest()
        pos, found = self._find(digest)
        if pos < 0:
            raise OffsetMapFullError("attempt to add a new entry to a full offset map")
        buf = self._bytes
        if not found:
            buf[pos : pos + HASH_SIZE] = digest
            self._entries += 1
            if self._entries <= self._track_limit:
                self._used.append(pos)
        _Q.pack_into(buf, pos + HASH_SIZE, offset)
        self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The latest offset stored for ``key``, or -1. (The first probe is inlined: it is
        the cleaner's per-record call.)"""
        native = self._native
        if native is not None:
            offset, probes = native.omap_get(self._bytes, self._slots, key)
            self._lookups += 1
            self._probes += probes
            return int(offset)
        digest = _md5(key, usedforsecurity=False).digest()
        buf = self._bytes
        self._lookups += 1
        pos = int.from_bytes(digest[:4], "big") % self._slots * BYTES_PER_ENTRY
        stored = buf[pos : pos + HASH_SIZE]
        if stored != digest:
            if stored == _EMPTY_HASH:
                return -1
            pos, found = self._probe(digest)
            if not found:
                return -1
        return int(_Q.unpack_from(buf, pos + HASH_SIZE)[0])

    def get_many(self, keys: list[bytes]) -> list[int]:
        """``get`` for each key, in order (the cleaner asks once per batch)."""
        native = self._native
        if native is not None:
            offsets, probes = native.omap_get_many(self._bytes, self._slots, keys)
            self._lookups += len(keys)
            self._probes += probes
            return list(offsets)
        return [self.get(k) for k in keys]

    def put_records(self, records: list[Any], start: int, max_entries: int) -> tuple[int, bool]:
        """The cleaner's map loop over one batch's ScannedRecords: put each keyed record at or
        above ``start`` while the map holds fewer than ``max_entries``. Returns (records
        read, map full); when full, the record that found it full is not counted."""
        native = self._native
        skip = 0
        if native is not None:
            skip, full = self._put_records_native(native, records, start, max_entries)
            if full or skip == len(records):
                return skip, full
        n = skip
        for rec in records[skip:] if skip else records:
            if rec.key is not None and rec.offset >= start:
                if self._entries >= max_entries:
                    return n, True
                self.put(rec.key, rec.offset)
            n += 1
        return n, False

    def _put_records_native(self, native: Any, records: list[Any], start: int,
                            max_entries: int) -> tuple[int, bool]:
        try:
            read, full, added, probes, lookups, latest, positions, overflow = \
                native.omap_put_records(self._bytes, self._slots, records, start,
                                        self._entries, max_entries, self._track_limit)
        except BaseException:
            self.lose_track()
            raise
        self.apply_native_puts(added, probes, lookups, positions, latest, overflow)
        return read, bool(full)

    # -- for native loops that work on the buffer directly (put_records, batch_runs) --------
    @property
    def native(self) -> Any:
        """The native core this map's loops run on, or None (the Python twins)."""
        return self._native

    def native_state(self) -> tuple[mmap.mmap, int, int, int]:
        """(buffer, slots, entries, how many used slots are tracked) for a native loop."""
        return self._bytes, self._slots, self._entries, self._track_limit

    def apply_native_puts(self, added: int, probes: int, lookups: int, positions: list[int],
                          latest: int | None, overflow: int) -> None:
        """Account the puts a native loop made in the buffer; ``overflow`` 1: it found no
        empty slot for a new key (what ``put`` raises)."""
        self._entries += added
        self._lookups += lookups
        self._probes += probes
        self._used.extend(positions)
        if latest is not None:
            self.latest_offset = latest
        if overflow == 1:
            raise OffsetMapFullError("attempt to add a new entry to a full offset map")

    def lose_track(self) -> None:
        """A native loop failed midway (out of memory): slots may hold entries that neither
        the counters nor the used-slot list know of, so the next ``clear`` zeroes the whole
        buffer instead of the listed slots (a stale entry could drop live records)."""
        self._entries = max(self._entries, self._track_limit + 1)

    def peek_many(self, keys: list[Any]) -> tuple[list[int], int]:
        """``get_many`` without counting: (offsets, probes); ``count_lookups`` counts them
        once the caller keeps the answer."""
        lookups, probes = self._lookups, self._probes
        found = self.get_many(keys)
        extra = self._probes - probes
        self._lookups, self._probes = lookups, probes
        return found, extra

    def count_lookups(self, lookups: int, probes: int) -> None:
        self._lookups += lookups
        self._probes += probes

    def _find(self, digest: bytes) -> tuple[int, bool]:
        """(byte position, True) of ``digest``'s slot, else (first empty slot, False), else
        (-1, False) when the map is full."""
        buf = self._bytes
        self._lookups += 1
        pos = int.from_bytes(digest[:4], "big") % self._slots * BYTES_PER_ENTRY
        stored = buf[pos : pos + HASH_SIZE]
        if stored == digest:
            return pos, True
        if stored == _EMPTY_HASH:
            return pos, False
        return self._probe(digest)

    def _probe(self, digest: bytes) -> tuple[int, bool]:
        """Kafka's positionOf after a first collision: the digest's 4-byte windows at bytes
        1..12, then linear steps from the last window, so every slot is visited and the loop
        is bounded."""
        buf, slots = self._bytes, self._slots
        windows = HASH_SIZE - 4
        last = int.from_bytes(digest[windows:], "big")
        for attempt in range(1, slots + windows):
            if attempt < windows:
                slot = int.from_bytes(digest[attempt : attempt + 4], "big") % slots
            else:
                slot = (last + attempt - windows) % slots
            pos = slot * BYTES_PER_ENTRY
            stored = buf[pos : pos + HASH_SIZE]
            if stored in (digest, _EMPTY_HASH):
                self._probes += attempt
                return pos, stored == digest
        self._probes += slots + windows
        return -1, False

    def update_latest_offset(self, offset: int) -> None:
        """Move ``latest_offset`` (the cleaner does so past keyless or aborted batches)."""
        self.latest_offset = offset

    def clear(self) -> None:
        buf = self._bytes
        if self._entries <= self._track_limit:
            if self._native is not None:
                self._native.omap_clear(buf, self._used)
            else:
                for pos in self._used:
                    buf[pos : pos + BYTES_PER_ENTRY] = _EMPTY_ENTRY
        elif hasattr(mmap, "MADV_DONTNEED") and hasattr(mmap, "MAP_PRIVATE"):
            # Linux: dropping the pages of a private anonymous mapping zeroes them (and gives
            # the memory back until the next round touches it).
            buf.madvise(mmap.MADV_DONTNEED)
        else:
            # Zero in 1 MiB steps: no temporary as large as the buffer.
            step = 1 << 20
            zero = bytes(step)
            n = len(buf)
            for pos in range(0, n, step):
                end = min(pos + step, n)
                buf[pos:end] = zero[: end - pos]
        self._used = array("q")
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self.latest_offset = -1

    def prefault(self) -> None:
        """Touch every page now, as the JVM's zero-filled buffer is at allocation (benchmarks:
        a long-running cleaner thread's map is resident)."""
        self._bytes[::4096] = bytes(len(range(0, len(self._bytes), 4096)))

    def __repr__(self) -> str:
        return (
            f"SkimpyOffsetMap(slots={self._slots}, entries={self._entries}, "
            f"latest_offset={self.latest_offset})"
        )
