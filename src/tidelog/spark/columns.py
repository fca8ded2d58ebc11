"""One decoding pass over a run of v2 batches into the buffers of Spark's Arrow columns.

Small batches made the per-batch work dominate a read (a few numpy calls per batch cost more
than decoding ten records), so the Arrow path hands a whole run of batches (a fetch
response's, a segment slice's) to one call: every record's boundaries and fields, the
offset filter, timestamps, and the key and value buffers come back at once, and the Python
side only wraps the buffers. ``decode_columns_py`` is the reference, written with the same
numpy walks as decode.py; the native core's ``decode_columns`` is its twin (same buffers,
same errors) and is used when built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tidelog._native import core as _native_core
from tidelog.records.batch import _HEADER, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, Buffer

from .decode import gather_py, record_fields_py, record_starts_py

HEADER_ROW = 4  # (row, batch index, header position in its payload, header count)
_I32_LIMIT = 2**31


class Columns(NamedTuple):
    """The Arrow buffers of the kept records (little-endian, native byte order)."""

    offsets: bytes  # int64
    timestamps: bytes  # int64, microseconds
    types: bytes  # int32: 0 CreateTime, 1 LogAppendTime
    key_offsets: bytes  # int32, n + 1
    key_data: bytes
    key_validity: bytes | None  # Arrow's bitmap, None when no key is null
    key_nulls: int
    value_offsets: bytes
    value_data: bytes
    value_validity: bytes | None
    value_nulls: int
    headers: bytes  # int64 rows of HEADER_ROW, for records whose header count is not 0

    @property
    def num_rows(self) -> int:
        return len(self.offsets) // 8


def _binary(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[bytes, bytes, bytes | None, int]:
    lengths = np.concatenate([ln for _, _, ln in parts]) if parts else np.zeros(0, np.int64)
    valid = lengths >= 0
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.where(valid, lengths, 0), out=offsets[1:])
    if offsets[-1] >= _I32_LIMIT:
        raise ValueError("more than 2 GiB of keys or values in one Arrow batch")
    data = b"".join(gather_py(d, p, ln).tobytes() for d, p, ln in parts)
    bitmap = None if valid.all() else np.packbits(valid, bitorder="little").tobytes()
    return offsets.astype(np.int32).tobytes(), data, bitmap, int((~valid).sum())


def _payload(batch: Buffer, given: Buffer | None) -> bytes:
    return bytes(memoryview(batch)[RECORD_BATCH_OVERHEAD:] if given is None else given)


def decode_columns_py(batches: Sequence[Buffer], payloads: Sequence[Buffer | None], start: int,
                      end: int, headers: bool) -> Columns:
    """The records with offsets in [start, end) of ``batches`` (each a whole v2 batch; its
    payload is ``payloads[i]``, the decompressed records, or None for the batch's own bytes
    past its header). Header counts and positions only with ``headers``. Malformed records
    raise what decode.py's walks raise, for the first batch holding one."""
    if len(batches) != len(payloads):
        raise ValueError("one payload (or None) per batch")
    for batch in batches:
        if len(batch) < RECORD_BATCH_OVERHEAD:
            raise ValueError(f"a batch of {len(batch)} bytes is shorter than its "
                             f"{RECORD_BATCH_OVERHEAD}-byte header")
    fixed: list[list[np.ndarray]] = [[], [], [], []]
    keys: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    values: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    rows = 0
    for i, (batch, given) in enumerate(zip(batches, payloads, strict=True)):
        (base_offset, _l, _e, _m, _c, attrs, _lod, base_ts, max_ts, _pid, _pe, _bs,
         count) = _HEADER.unpack_from(batch, 0)
        payload = _payload(batch, given)
        starts = record_starts_py(payload, max(0, min(count, len(payload) + 1)))
        f = record_fields_py(payload, starts, headers)
        offsets = f[0] + np.int64(base_offset)
        keep = (offsets >= start) & (offsets < end)
        f, offsets = f[:, keep], offsets[keep]
        n = len(offsets)
        log_append = bool(attrs & TIMESTAMP_TYPE_MASK)
        stamps = np.full(n, max_ts, np.int64) if log_append else f[1] + np.int64(base_ts)
        with_headers = np.flatnonzero(f[6])
        fixed[0].append(offsets)
        fixed[1].append(stamps * 1000)
        fixed[2].append(np.full(n, int(log_append), np.int32))
        fixed[3].append(np.stack([with_headers + rows, np.full(len(with_headers), i),
                                  f[7][with_headers], f[6][with_headers]], axis=1).ravel())
        data = np.frombuffer(payload, dtype=np.uint8)
        keys.append((data, f[2], f[3]))
        values.append((data, f[4], f[5]))
        rows += n
    cat = [(np.concatenate(c) if c else np.zeros(0, np.int64)).astype(t, copy=False).tobytes()
           for c, t in zip(fixed, (np.int64, np.int64, np.int32, np.int64), strict=True)]
    return Columns(cat[0], cat[1], cat[2], *_binary(keys), *_binary(values), cat[3])


def _decode_columns_native(batches: Sequence[Buffer], payloads: Sequence[Buffer | None],
                           start: int, end: int, headers: bool) -> Columns:
    """The native twin of ``decode_columns_py``: same buffers, same errors."""
    assert _native_core is not None
    return Columns(*_native_core.decode_columns(batches, payloads, start, end, headers))


decode_columns = (_decode_columns_native if hasattr(_native_core, "decode_columns")
                  else decode_columns_py)

SPAN_ROW = 3  # (buffer index, byte position, size) of one batch


def decode_runs_py(bufs: Sequence[Buffer], spans: Buffer | np.ndarray, payloads: Sequence[Buffer | None],
                   start: int, end: int, headers: bool) -> Columns:
    """``decode_columns_py`` over the batches at ``spans`` (int64 rows of SPAN_ROW) of
    ``bufs``: a fetch response's batches are decoded where they lie, with no object per
    batch. A span outside its buffer raises ValueError before any batch is read."""
    raw = memoryview(spans.astype(np.int64).tobytes() if isinstance(spans, np.ndarray)
                     else spans).cast("B")
    if len(raw) % (8 * SPAN_ROW):
        raise ValueError("spans must be int64 rows of three")
    rows = np.frombuffer(raw, dtype=np.int64).reshape(-1, SPAN_ROW).tolist()
    if len(payloads) != len(rows):
        raise ValueError("one payload (or None) per batch")
    views = [memoryview(b).cast("B") for b in bufs]
    for i, (b, pos, size) in enumerate(rows):
        if not (0 <= b < len(views)) or pos < 0 or size < 0 or pos > len(views[b]) - size:
            raise ValueError(f"span {i} is outside its buffer")
    return decode_columns_py([views[b][pos:pos + size] for b, pos, size in rows], payloads,
                             start, end, headers)


def _decode_runs_native(bufs: Sequence[Buffer], spans: Buffer | np.ndarray, payloads: Sequence[Buffer | None],
                        start: int, end: int, headers: bool) -> Columns:
    """The native twin of ``decode_runs_py``: same buffers, same errors."""
    assert _native_core is not None
    return Columns(*_native_core.decode_runs(bufs, spans, payloads, start, end, headers))


decode_runs = _decode_runs_native if hasattr(_native_core, "decode_runs") else decode_runs_py
