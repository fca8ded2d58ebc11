"""The transaction parts of ``tidelog dump-log``: ``.txnindex`` files (Kafka's 34-byte
aborted-transaction entries) and ``--transaction-log-decoder`` for ``__transaction_state``
records (Kafka's TransactionLogMessageFormatter text)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset


def txn_index_items(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Entries of a ``.txnindex`` (read-only), and errors for a bad version or a torn tail."""
    data = path.read_bytes()
    items: list[dict[str, Any]] = []
    errors: list[str] = []
    for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != 0:
            errors.append(f"{path}: unexpected aborted transaction version {version} at byte "
                          f"{pos}")
            break
        items.append({"version": version, "producerId": pid, "firstOffset": first,
                      "lastOffset": last, "lastStableOffset": lso})
    tail = len(data) % _ENTRY.size
    if tail and not errors:
        errors.append(f"{path}: {tail} trailing bytes are not a whole {_ENTRY.size}-byte entry")
    return items, errors


def decode_transaction_record(key: bytes | None, value: bytes | None) -> str:
    from tidelog.server.coordinator.transaction.records import format_record

    k, v = format_record(key, value)
    return f"key: {k} payload: {v}"
