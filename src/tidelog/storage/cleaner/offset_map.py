"""SkimpyOffsetMap: Kafka's bounded-memory map from a key's MD5 hash to its latest offset.

The cleaner only needs "what is the latest offset of this key in the dirty range"; storing
the 16-byte digest instead of the key bounds memory to 24 bytes per slot (digest + int64
offset) whatever the key sizes. Slots live in one preallocated bytearray with open
addressing: the first probes read successive 4-byte windows of the digest, later ones step
linearly (Kafka's ``positionOf``). A slot whose 24 bytes are all zero is empty; an MD5
digest of all zero bytes is not a practical concern (Kafka makes the same assumption).

The map is "full" for the cleaner at ``slots * load_factor`` entries; ``put`` itself only
refuses a new key when every slot is used. Two keys with the same digest would share an
entry (so the older key's records could be dropped); Kafka accepts that risk for MD5 and so
do we.
"""

from __future__ import annotations

import hashlib
import struct

HASH_SIZE = 16  # MD5 digest
OFFSET_SIZE = 8
BYTES_PER_ENTRY = HASH_SIZE + OFFSET_SIZE

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_EMPTY_HASH = bytes(HASH_SIZE)
_ZERO_OFFSET = bytes(OFFSET_SIZE)


class OffsetMapFullError(RuntimeError):
    """A new key was put into a map whose every slot is in use."""


class SkimpyOffsetMap:
    """Key hash -> latest offset, in ``memory`` bytes (``memory // 24`` slots)."""

    __slots__ = ("_bytes", "_entries", "_lookups", "_probes", "_slots", "latest_offset")

    def __init__(self, memory: int) -> None:
        slots = memory // BYTES_PER_ENTRY
        if slots < 1:
            raise ValueError(f"offset map needs at least {BYTES_PER_ENTRY} bytes, got {memory}")
        self._slots = slots
        self._bytes = bytearray(slots * BYTES_PER_ENTRY)
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
        return (self._probes - self._lookups) / self._lookups if self._lookups else 0.0

    def max_entries(self, load_factor: float) -> int:
        """Entries at which the cleaner treats the map as full (Kafka: slots * loadFactor)."""
        return int(self._slots * load_factor)

    # -- operations --------------------------------------------------------------------------
    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Record ``offset`` as the latest for ``key``; also advances ``latest_offset``."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        buf = self._bytes
        self._lookups += 1
        # Linear steps after the digest windows visit every slot, so this loop is bounded.
        for attempt in range(self._slots + HASH_SIZE):
            pos = self._position_of(digest, attempt)
            stored = bytes(buf[pos : pos + HASH_SIZE])
            if stored == digest:
                _Q.pack_into(buf, pos + HASH_SIZE, offset)
                break
            if stored == _EMPTY_HASH and buf[pos + HASH_SIZE : pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
                buf[pos : pos + HASH_SIZE] = digest
                _Q.pack_into(buf, pos + HASH_SIZE, offset)
                self._entries += 1
                break
        else:
            raise OffsetMapFullError("attempt to add a new entry to a full offset map")
        self.latest_offset = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The latest offset stored for ``key``, or -1."""
        digest = hashlib.md5(key, usedforsecurity=False).digest()
        buf = self._bytes
        self._lookups += 1
        # Bounded: an absent key ends at an empty slot, or after visiting every slot.
        for attempt in range(self._slots + HASH_SIZE):
            pos = self._position_of(digest, attempt)
            stored = bytes(buf[pos : pos + HASH_SIZE])
            if stored == digest:
                return int(_Q.unpack_from(buf, pos + HASH_SIZE)[0])
            if stored == _EMPTY_HASH and buf[pos + HASH_SIZE : pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
                return -1
        return -1

    def update_latest_offset(self, offset: int) -> None:
        """Move ``latest_offset`` (the cleaner does so past keyless or aborted batches)."""
        self.latest_offset = offset

    def clear(self) -> None:
        if self._entries:
            # Zero in 1 MiB steps: no temporary as large as the (default 128 MiB) map.
            step = 1 << 20
            zero = bytes(step)
            buf, n = self._bytes, len(self._bytes)
            for pos in range(0, n, step):
                end = min(pos + step, n)
                buf[pos:end] = zero[: end - pos]
        self._entries = 0
        self._lookups = 0
        self._probes = 0
        self.latest_offset = -1

    def _position_of(self, digest: bytes, attempt: int) -> int:
        # Kafka: readInt(hash, min(attempt, 12)) + max(0, attempt - 12), then abs % slots.
        window = attempt if attempt < HASH_SIZE - 4 else HASH_SIZE - 4
        probe = _I.unpack_from(digest, window)[0] + max(0, attempt - HASH_SIZE + 4)
        probe = (probe + 2**31) % 2**32 - 2**31  # Java int overflow
        slot = (0 if probe == -(2**31) else abs(probe)) % self._slots
        self._probes += 1
        return slot * BYTES_PER_ENTRY

    def __repr__(self) -> str:
        return (
            f"SkimpyOffsetMap(slots={self._slots}, entries={self._entries}, "
            f"latest_offset={self.latest_offset})"
        )
