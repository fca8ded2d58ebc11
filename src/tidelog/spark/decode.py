"""Vectorised decoding of v2 records into Arrow columns (numpy), for the Spark read path.

Only the record boundaries need a Python loop (one length varint per record); every field
after that is decoded for all records of a batch at once: each varint column is read as an
n x 10 byte matrix, and key/value bytes are gathered from the payload with one fancy index.
These walks are the reference for the native core's; columns.py runs them over a whole run
of batches into the buffers of Arrow columns.
"""

from __future__ import annotations

import numpy as np

from tidelog._native import core as _native_core

_K = np.arange(10)
_SHIFTS = (7 * _K).astype(np.uint64)
_PAD = bytes(10)  # so a 10-byte window at the last varint never runs off the buffer


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def record_starts_py(buf: bytes, count: int) -> np.ndarray:
    """Byte position of each record (walks the length prefixes)."""
    starts = [0] * count
    pos = 0
    for i in range(count):
        starts[i] = pos
        x = buf[pos]
        if x < 0x80:
            pos += 1 + (x >> 1)
            continue
        y = buf[pos + 1]
        if y < 0x80:  # two bytes: records of 64..8191 bytes
            pos += 2 + (((x & 0x7F) | (y << 7)) >> 1)
        else:
            x, pos = _uvarint(buf, pos)
            pos += x >> 1
    return np.array(starts, dtype=np.int64)


def _record_starts_native(buf: bytes, count: int) -> np.ndarray:
    """The native twin of ``record_starts_py`` (tidelog._native): same positions, same errors."""
    assert _native_core is not None
    return np.frombuffer(_native_core.record_starts(buf, count), dtype=np.int64)


record_starts = _record_starts_native if _native_core is not None else record_starts_py


def varints(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zig-zag decoded values, encoded sizes) of the varints starting at ``pos``."""
    window = data[pos[:, None] + _K]
    size = np.argmax(window < 0x80, axis=1) + 1
    used = _K[None, :] < size[:, None]
    raw = (((window & 0x7F).astype(np.uint64) << _SHIFTS) * used).sum(axis=1, dtype=np.uint64)
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, size


FIELDS = 8  # off_delta, ts_delta, key_pos, key_len, value_pos, value_len, header_count, header_pos


def record_fields_py(payload: bytes, starts: np.ndarray, headers: bool) -> np.ndarray:
    """The fields of the records starting at ``starts``, as rows of a (FIELDS, n) int64 array.

    Positions are into ``payload``; a null key or value has length -1; header counts and
    positions (just after the count) only with ``headers``, else zero and the value's end.
    A record whose fields run past its length, or past the payload, raises ValueError naming
    the first such record. Reads are clipped to the payload so a bad record cannot index
    outside it; a varint without its last byte in 10 counts as one byte (numpy's argmax)."""
    size_l = len(payload)
    if len(starts) and (int(starts.min()) < 0 or int(starts.max()) >= size_l):
        raise ValueError(f"a record start outside the batch's {size_l} bytes")
    data = np.frombuffer(payload + _PAD, dtype=np.uint8)
    length, size = varints(data, starts)
    rec_end = starts + size + np.clip(length, -1, size_l + 1)
    p = np.minimum(starts + size + 1, size_l)  # after the length and the attributes byte
    ts_deltas, size = varints(data, p)
    p = np.minimum(p + size, size_l)
    off_deltas, size = varints(data, p)
    p = np.minimum(p + size, size_l)
    key_len, size = varints(data, p)
    key_pos = np.minimum(p + size, size_l)
    key_end = key_pos + np.clip(key_len, 0, size_l)
    value_len, size = varints(data, np.minimum(key_end, size_l))
    value_pos = np.minimum(key_end, size_l) + size
    value_end = np.minimum(value_pos, size_l) + np.clip(value_len, 0, size_l)
    if headers:
        header_count, size = varints(data, np.minimum(value_end, size_l))
        header_pos = np.minimum(value_end, size_l) + size
    else:
        header_count, header_pos = np.zeros(len(starts), np.int64), value_end
    bad = (rec_end > size_l) | (key_end > rec_end) | (value_end > rec_end) | (
        header_pos > rec_end)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"record {i} at byte {int(starts[i])} of the batch runs past its "
                         f"length or the batch's end ({size_l} bytes)")
    return np.stack([off_deltas, ts_deltas, key_pos, key_len, value_pos, value_len,
                     header_count, header_pos])


def _record_fields_native(payload: bytes, starts: np.ndarray, headers: bool) -> np.ndarray:
    """The native twin of ``record_fields_py``: same array, same errors."""
    assert _native_core is not None
    raw = _native_core.record_fields(payload, starts, headers)
    return np.frombuffer(raw, dtype=np.int64).reshape(FIELDS, len(starts))


record_fields = (_record_fields_native if hasattr(_native_core, "record_fields")
                 else record_fields_py)


def gather_py(data: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The bytes ``data[pos[i] : pos[i] + length[i]]`` back to back (a negative length: none)."""
    n = np.where(length >= 0, length, 0)
    if len(n) and (int(pos.min()) < 0 or int((pos + n).max()) > len(data)):
        raise ValueError(f"a key or value outside its batch's {len(data)} bytes")
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.uint8)
    local = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=local[1:])
    return data[np.arange(total) + np.repeat(pos - local[:-1], n)]


def _gather_native(data: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The native twin of ``gather_py`` (one memcpy per record): same bytes, same errors."""
    assert _native_core is not None
    return np.frombuffer(_native_core.gather(data, pos, length), dtype=np.uint8)


gather = _gather_native if hasattr(_native_core, "gather") else gather_py
