"""JSON written as Kafka's ``Json.encodeAsBytes`` writes it, byte for byte.

Kafka serialises Scala maps with Jackson: compact (no spaces), UTF-8 unescaped, and in the
map's own iteration order. That order is not insertion order for most of ZkData's maps:

* ``Map(a -> 1, ...)`` with at most four entries is ``Map1``..``Map4``: insertion order;
  with more it is a CHAMP ``immutable.HashMap``: ordered by the improved hash's 5-bit
  groups, a node's own entries before its sub-nodes (pre-order);
* ``mutable.Map(...)`` / ``mutable.HashMap`` (16 buckets, load factor 0.75, doubling):
  bucket ``(h ^ h >>> 16) & (size - 1)`` in ascending order, within a bucket ascending
  (signed) hash.

Keys are Strings, whose hash is Java's ``String.hashCode``. ``ScalaMap`` /
``ScalaHashMap`` carry which kind a ZkData encoder built, so ``dumps`` orders each level
as Kafka's bytes do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tidelog.util.java_hash import java_string_hash

_MASK = 0xFFFFFFFF


def _signed(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


def _improve_champ(h: int) -> int:
    # scala.collection.Hashing.improve
    h = (h + (~(h << 9) & _MASK)) & _MASK
    h ^= h >> 14
    h = (h + (h << 4)) & _MASK
    return h ^ (h >> 10)


def _champ_order(keys: list[str], shift: int = 0) -> list[str]:
    buckets: dict[int, list[str]] = {}
    for k in keys:
        buckets.setdefault((_improve_champ(java_string_hash(k) & _MASK) >> shift) & 31, []).append(k)
    order = [b[0] for _, b in sorted(buckets.items()) if len(b) == 1]
    if shift >= 30:  # a full-hash collision node keeps insertion order
        return order + [k for _, b in sorted(buckets.items()) if len(b) > 1 for k in b]
    for _, b in sorted(buckets.items()):
        if len(b) > 1:
            order += _champ_order(b, shift + 5)
    return order


def immutable_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of Scala 2.13's ``immutable.Map`` built from these keys in order."""
    keys = list(dict.fromkeys(keys))
    return keys if len(keys) <= 4 else _champ_order(keys)


def _table_size(n: int) -> int:
    size = 16
    for k in range(n):  # put0 grows before inserting when contentSize + 1 >= threshold
        if k + 1 >= int(size * 0.75):
            size *= 2
    return size


def mutable_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of Scala 2.13's ``mutable.HashMap`` holding these keys."""
    keys = list(dict.fromkeys(keys))
    size = _table_size(len(keys))
    table: dict[int, list[tuple[int, str]]] = {}
    for k in keys:
        h = java_string_hash(k) & _MASK
        h ^= h >> 16
        table.setdefault(h & (size - 1), []).append((_signed(h), k))
    return [k for i in sorted(table) for _, k in sorted(table[i])]


class ScalaMap(dict[str, Any]):
    """A map Kafka builds as ``immutable.Map(...)`` (insertion order up to four entries)."""

    def ordered_keys(self) -> list[str]:
        return immutable_map_order(self.keys())


class ScalaHashMap(dict[str, Any]):
    """A map Kafka builds as ``mutable.Map``/``mutable.HashMap``."""

    def ordered_keys(self) -> list[str]:
        return mutable_map_order(self.keys())


def _ordered(value: Any) -> Any:
    if isinstance(value, ScalaMap | ScalaHashMap):
        return {k: _ordered(value[k]) for k in value.ordered_keys()}
    if isinstance(value, Mapping):
        return {k: _ordered(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_ordered(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON in Kafka's key order (plain dicts keep their own order)."""
    return json.dumps(_ordered(value), separators=(",", ":"), ensure_ascii=False).encode()


def loads(data: bytes | None) -> Any:
    """Parse a znode's JSON; ``None`` for an empty or missing value (Kafka's parseBytes)."""
    if not data:
        return None
    return json.loads(data.decode())
