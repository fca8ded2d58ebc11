"""Java's ``String.hashCode``, which Kafka's partition and fetcher assignments are built on.

Kafka maps a group or transactional id to its coordinator partition with
``Utils.abs(id.hashCode()) % partitions``, a partition to its replica fetcher with
``Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers``, and Scala's maps order
the keys of the JSON it writes to ZooKeeper by it. Hand-written: no Python library gives
Java's string hash (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit
two's complement arithmetic).
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000


def to_int32(x: int) -> int:
    """``x`` wrapped to a Java ``int`` (32-bit two's complement)."""
    x &= _MASK
    return x - (1 << 32) if x & _SIGN else x


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` of a Java ``int``: like ``Math.abs``, but ``Integer.MIN_VALUE``
    maps to 0 (not to itself)."""
    return 0 if n == -(1 << 31) else abs(n)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: signed, over UTF-16 code units (a character outside the
    Basic Multilingual Plane counts as its two surrogates)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h - (1 << 32) if h & _SIGN else h


__all__ = ["java_abs", "java_string_hash", "to_int32"]
