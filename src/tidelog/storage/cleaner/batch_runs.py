"""Runs of plain batches: the cleaner's two passes without Python work per batch or record.

Most batches a cleaner reads are *plain*: whole, a good header and CRC, neither transactional
nor control, with records written the way Kafka writes them (compressed or not). For a run of
such batches the map pass only hashes keys into the offset map, and the filter pass drops a
batch (nothing kept), copies it unchanged (everything kept) or re-writes it with the records
kept (``batch_filter.rebuild_batch``, re-compressed in its codec). ``map_run`` and
``filter_run`` do exactly that over a chunk of a segment, in the native core
(``_core.clean_map_run`` / ``clean_filter_run``, which call the reference code's own
``decompress``/``compress`` for a compressed batch) or in their pure-Python twins here
(``map_run_py`` / ``filter_run_py``), and stop *before* the first batch they do not take
that way: a malformed, transactional or control batch, one its codec refuses, one whose
timestamps are no int64s, or an emptied one that must stay as a header. The cleaner hands that one batch to its reference per-batch code (Kafka's
``Cleaner``: ``_map_batch`` / ``filter_batch``), which raises the exact error or handles
the rare case, then resumes the run. A run never raises for what it reads.

What a run does to the map, the counters and the output is what the reference code does to
them for the same batches; tests hold the twins to each other and whole cleanings to the
reference code alone.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from tidelog.records import RECORD_BATCH_OVERHEAD, RecordBatch, compress, crc32c, decompress
from tidelog.records.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_MASK,
)
from tidelog.records.errors import CorruptRecordError

from ..file_records import BATCH_CHUNK, FileRecords, parse_header
from .batch_filter import ScannedRecord, rebuild_batch
from .offset_map import SkimpyOffsetMap

Buffer = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
_SKIP = TRANSACTIONAL_MASK | CONTROL_MASK
_MAX_CODEC = 4  # zstd; above: no codec Kafka knows
# What the native runs call for a compressed batch: the reference code's own codec functions.
_CODECS = (decompress, compress)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class MapRun(NamedTuple):
    end: int  # buffer offset after the last batch taken
    batches: int
    bytes: int  # map_bytes_read
    read: int  # map_messages_read
    full: bool  # the map reached max_entries (its last batch was partly mapped)
    last_offset: int | None  # of the last batch taken


class FilterRun(NamedTuple):
    end: int
    batches: int
    bytes_read: int
    messages_read: int
    output: bytes  # the batches kept, unchanged
    messages_retained: int
    bytes_retained: int
    max_timestamp: int  # the caller's max_timestamp, raised by the batches kept
    shallow_offset: int | None  # last offset of the batch that raised it, None: not raised
    max_offset: int  # -1 if nothing kept
    last_written: int | None  # last offset of the last batch kept
    invalid: int  # keyless records below the map's latest offset (invalid_messages_read)
    last_offset: int | None  # of the last batch taken


# -- the plain batch and its records (the C twin: _native/cleaner_runs.c) -------------------
def _plain_header(buf: memoryview, off: int, codecs: bool = True
                  ) -> tuple[int, int, int, int, int, int, int, int] | None:
    """(size, base offset, last offset, base timestamp, max timestamp, producer id, count,
    attributes) of the batch at ``off`` if it is plain (compressed ones only with
    ``codecs``), else None."""
    n = len(buf) - off
    if n < RECORD_BATCH_OVERHEAD:
        return None
    base, length, _epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, _pe, _seq, count = \
        _HEADER.unpack_from(buf, off)
    size = LOG_OVERHEAD + length
    if size < RECORD_BATCH_OVERHEAD or size > n or magic != MAGIC_V2:
        return None
    codec = attrs & COMPRESSION_MASK
    if attrs & _SKIP or count < 0 or codec > _MAX_CODEC or (codec and not codecs):
        return None
    if not codec and count > size - RECORD_BATCH_OVERHEAD:
        return None  # a record takes at least a byte
    last = base + delta
    if not _INT64_MIN <= last < _INT64_MAX:  # next_offset must be an int64 too
        return None
    if crc32c(buf[off + CRC_START : off + size]) != crc:
        return None
    return size, base, last, base_ts, max_ts, pid, count, attrs


def _payload(b: memoryview, off: int, size: int, attrs: int, count: int) -> memoryview | None:
    """The records of a plain batch: after its header, or decompressed as the reference code
    does it (None, not plain, if the codec refuses it or it holds fewer bytes than records)."""
    codec = attrs & COMPRESSION_MASK
    body = b[off + RECORD_BATCH_OVERHEAD : off + size]
    if not codec:
        return body
    try:
        payload = decompress(codec, bytes(body))
    except Exception:  # the reference code raises it
        return None
    return memoryview(payload) if isinstance(payload, bytes) and count <= len(payload) else None


def _uvarint(b: memoryview, end: int, pos: int, max_bytes: int) -> tuple[int, int] | None:
    raw = 0
    for i in range(max_bytes):
        if pos >= end:
            return None
        c = b[pos]
        pos += 1
        raw |= (c & 0x7F) << (7 * i)
        if c < 0x80:
            return raw, pos
    return None


class PlainRecord(NamedTuple):
    offset: int
    key: int  # position of the key in the buffer, or -1: no key
    key_length: int
    has_value: bool
    start: int  # position of the length varint
    attr_pos: int
    ts_end: int  # position after the timestamp delta
    end: int
    timestamp: int | None  # base timestamp + delta, None if that is no int64


def _plain_records(b: memoryview, pos: int, n: int, count: int, base: int, base_ts: int
                   ) -> list[PlainRecord] | None:
    """The records of the payload ``b[pos:n]``, read strictly: length, offset delta and key
    length in at most 5 varint bytes, the timestamp delta in at most 10, every field inside
    its record. None if any record is not so, or the records do not end exactly at ``n``.
    What it accepts, batch_filter.scan_records reads alike."""
    out = []
    for _ in range(count):
        start = pos
        v = _uvarint(b, n, pos, 5)
        if v is None:
            return None
        length = (v[0] >> 1) ^ -(v[0] & 1)
        if length < 0 or length > n - v[1]:
            return None
        attr, end = v[1], v[1] + length
        ts = _uvarint(b, end, attr + 1, 10)  # the timestamp delta, after the attributes
        d = _uvarint(b, end, ts[1], 5) if ts is not None else None
        k = _uvarint(b, end, d[1], 5) if d is not None else None
        if ts is None or d is None or k is None:
            return None
        offset = base + ((d[0] >> 1) ^ -(d[0] & 1))
        klen = (k[0] >> 1) ^ -(k[0] & 1)
        q = k[1]
        if not _INT64_MIN <= offset <= _INT64_MAX or klen < -1 or klen > end - q:
            return None
        key = q if klen >= 0 else -1
        q += max(klen, 0)
        if q >= end:
            return None
        timestamp: int | None = base_ts + ((ts[0] >> 1) ^ -(ts[0] & 1))
        if ts[0] >> 64 or not _INT64_MIN <= timestamp <= _INT64_MAX:  # type: ignore[operator]
            timestamp = None
        out.append(PlainRecord(offset, key, max(klen, 0), b[q] != 1, start, attr, ts[1], end,
                               timestamp))
        pos = end
    return out if pos == n else None


# -- pass 1: the offset map -----------------------------------------------------------------
def map_run_py(omap: SkimpyOffsetMap, buf: Buffer, off: int, start: int, max_entries: int
               ) -> MapRun:
    """Map the run of plain batches at ``off``: what Cleaner._map_batch does for each, the
    throttle and stats left to the caller (who adds the run's bytes and records)."""
    b = memoryview(buf)
    batches = nbytes = read = 0
    last = None
    while (h := _plain_header(b, off)) is not None:
        size, base, last_off, base_ts, _mts, _pid, count, attrs = h
        pv = _payload(b, off, size, attrs, count)
        recs = None if pv is None else _plain_records(pv, 0, len(pv), count, base, base_ts)
        if pv is None or recs is None:
            break
        batches, nbytes, off, last = batches + 1, nbytes + size, off + size, last_off
        for offset, key, klen, *_rest in recs:
            if key >= 0 and offset >= start:
                if len(omap) >= max_entries:
                    return MapRun(off, batches, nbytes, read, True, last)
                omap.put(pv[key : key + klen], offset)
            read += 1
        if last_off >= start:
            omap.update_latest_offset(last_off)
    return MapRun(off, batches, nbytes, read, False, last)


def _map_run_native(omap: SkimpyOffsetMap, buf: Buffer, off: int, start: int,
                    max_entries: int) -> MapRun:
    native: Any = omap.native
    buffer, slots, entries, track = omap.native_state()
    try:
        (end, batches, nbytes, read, full, added, probes, lookups, latest, positions, last,
         overflow) = native.clean_map_run(buf, off, buffer, slots, start, entries,
                                          max_entries, track, _CODECS)
    except BaseException:
        omap.lose_track()  # MemoryError midway: slots written that the counters miss
        raise
    omap.apply_native_puts(added, probes, lookups, positions, latest, overflow)
    return MapRun(end, batches, nbytes, read, bool(full), last)


def map_run(omap: SkimpyOffsetMap, buf: Buffer, off: int, start: int, max_entries: int
            ) -> MapRun:
    """The native run at ``off``; on the Python core an empty run, so that every batch goes
    through the reference per-batch code (``map_run_py`` is the native run's twin, held to
    it by tests, but slower in Python than the reference code's own loops)."""
    if omap.native is not None:
        return _map_run_native(omap, buf, off, start, max_entries)
    return MapRun(off, 0, 0, 0, False, None)


# -- pass 2: the filter ---------------------------------------------------------------------
class FilterParams(NamedTuple):
    """The cleaning pass's facts a run needs (the _CleanerFilter's)."""

    latest: int  # the offset map's latest offset
    now: int
    new_horizon: int  # now + delete.retention.ms: the delete horizon a pass sets
    upper_bound: int
    group_end: int
    last_data: dict[int, int]  # producer id -> last data offset, of the active producers


def filter_run_py(omap: SkimpyOffsetMap, buf: Buffer, off: int, fp: FilterParams,
                  budget: int, max_ts: int) -> FilterRun:
    """Filter the run of plain batches at ``off`` until ``budget`` bytes are read: what
    filter_batch does for each batch it drops (nothing kept, no header to keep), copies
    (everything kept, no delete horizon to set) or rebuilds (the rest)."""
    b = memoryview(buf)
    batches = nread = messages = retained = bytes_retained = invalid = 0
    shallow: int | None = None
    max_offset, written, last = -1, None, None
    out = bytearray()
    while nread < budget and (h := _plain_header(b, off)) is not None:
        size, base, last_off, base_ts, bmax_ts, pid, count, attrs = h
        pv = _payload(b, off, size, attrs, count)
        recs = None if pv is None else _plain_records(pv, 0, len(pv), count, base, base_ts)
        if pv is None or recs is None:
            break
        keep, tombstone, inv, lookups, probes = _keep(omap, pv, recs, fp, attrs, base_ts)
        kept = [r for r, k in zip(recs, keep, strict=True) if k]
        if not kept:
            if last_off + 1 in (fp.upper_bound, fp.group_end) or \
                    (pid >= 0 and fp.last_data.get(pid) == last_off):
                break  # an empty header stays: the reference code writes it
        else:
            need_horizon = tombstone and not attrs & DELETE_HORIZON_MASK
            if len(kept) == count and not need_horizon:
                data, last_kept = bytes(b[off : off + size]), last_off
            else:
                rebuilt = _rebuild(b[off : off + size], pv, kept,
                                   fp.new_horizon if need_horizon else None)
                if rebuilt is None:
                    break  # odd timestamps: the reference code rebuilds it
                data, bmax_ts = rebuilt
                last_kept = kept[-1].offset
            out += data
            if bmax_ts > max_ts:
                max_ts, shallow = bmax_ts, last_off
            max_offset = max(max_offset, last_kept)
            retained += len(kept)
            bytes_retained += len(data)
            written = last_off
        omap.count_lookups(lookups, probes)
        batches, nread, messages, invalid = batches + 1, nread + size, messages + count, \
            invalid + inv
        last, off = last_off, off + size
    return FilterRun(off, batches, nread, messages, bytes(out), retained, bytes_retained,
                     max_ts, shallow, max_offset, written, invalid, last)


def _keep(omap: SkimpyOffsetMap, b: memoryview, recs: list[PlainRecord], fp: FilterParams,
          attrs: int, base_ts: int) -> tuple[list[bool], bool, int, int, int]:
    """(keep per record, a kept one is a tombstone, keyless records below latest, lookups,
    probes): _CleanerFilter.retain_records on one batch."""
    tombstones_kept = not attrs & DELETE_HORIZON_MASK or fp.now < base_ts
    latest = fp.latest
    keys = [b[r.key : r.key + r.key_length] for r in recs if r.offset <= latest and r.key >= 0]
    found, probes = omap.peek_many(keys)
    it = iter(found)
    keep, invalid, tombstone = [], 0, False
    for r in recs:
        if r.offset > latest:
            k = True
        elif r.key < 0:
            invalid += 1
            k = False
        else:
            k = r.offset >= next(it) and (r.has_value or tombstones_kept)
        keep.append(k)
        tombstone |= k and not r.has_value
    return keep, tombstone, invalid, len(keys), probes


def _rebuild(view: memoryview, payload: memoryview, kept: list[PlainRecord],
             horizon: int | None) -> tuple[bytes, int] | None:
    """batch_filter.rebuild_batch itself (the reference), or None where the native twin does
    not rebuild: a kept record's timestamp, or its delta from the new base, is no int64, or
    the codec refuses the body (the reference code raises that)."""
    batch = RecordBatch(view)
    if horizon is None:
        horizon = batch.delete_horizon_ms
    if any(r.timestamp is None for r in kept):
        return None
    base_ts = kept[0].timestamp if horizon is None else horizon
    if base_ts != batch.base_timestamp and not all(
            _INT64_MIN <= r.timestamp - base_ts <= _INT64_MAX for r in kept):  # type: ignore[operator]
        return None
    scanned = [ScannedRecord(r.offset, r.timestamp, None, r.has_value, r.start,  # type: ignore[arg-type]
                             r.attr_pos, r.ts_end, r.end) for r in kept]
    try:
        return rebuild_batch(batch, payload, scanned, horizon)
    except Exception:  # the codec's: the reference code raises it
        return None


def _filter_run_native(omap: SkimpyOffsetMap, buf: Buffer, off: int, fp: FilterParams,
                       budget: int, max_ts: int) -> FilterRun:
    native: Any = omap.native
    buffer, slots, _entries, _track = omap.native_state()
    r = native.clean_filter_run(buf, off, buffer, slots, fp.latest, fp.now, fp.new_horizon,
                                fp.upper_bound, fp.group_end, fp.last_data, budget, max_ts,
                                _CODECS)
    (end, batches, nread, messages, output, retained, bytes_retained, max_ts, shallow,
     max_offset, written, invalid, lookups, probes, last) = r
    omap.count_lookups(lookups, probes)
    return FilterRun(end, batches, nread, messages, output, retained, bytes_retained, max_ts,
                     shallow, max_offset, written, invalid, last)


def filter_run(omap: SkimpyOffsetMap, buf: Buffer, off: int, fp: FilterParams, budget: int,
               max_ts: int) -> FilterRun:
    """As ``map_run``: native, or empty on the Python core (``filter_run_py`` is the twin),
    or where a delete horizon would not be an int64 (the reference code raises there)."""
    if omap.native is not None and _INT64_MIN <= fp.new_horizon <= _INT64_MAX:
        return _filter_run_native(omap, buf, off, fp, budget, max_ts)
    return FilterRun(off, 0, 0, 0, b"", 0, 0, max_ts, None, -1, None, 0, None)


# -- reading a segment in chunks ------------------------------------------------------------
class SegmentReader:
    """One segment's `.log` in chunks of about 1 MiB: runs take the chunk holding a position,
    the reference code takes one batch, read and checked exactly as
    FileRecords.batches(validate=True) yields it."""

    def __init__(self, records: FileRecords) -> None:
        self._records = records
        self._path = str(records.file)
        self._limit = records.size_in_bytes
        self._buf = memoryview(b"")
        self._start = 0

    def _read(self, pos: int, size: int) -> None:
        self._buf = memoryview(self._records.slice(pos, size).read())
        self._start = pos

    def _header_at(self, pos: int) -> tuple[int, int] | None:
        """(offset of ``pos`` in the buffer, now holding at least a batch header there when
        the file does, bytes left in the file), or None once no header can follow."""
        left = self._limit - pos
        if left <= HEADER_SIZE_UP_TO_MAGIC:
            return None
        off = pos - self._start
        if off < 0 or off + RECORD_BATCH_OVERHEAD > len(self._buf):
            self._read(pos, min(BATCH_CHUNK, left))
            off = 0
        return off, left

    def chunk(self, pos: int) -> tuple[memoryview, int] | None:
        """(buffer, offset of ``pos`` in it) holding the whole batch at ``pos`` when its
        length says it fits the file; None once no header can follow."""
        at = self._header_at(pos)
        if at is None:
            return None
        off, left = at
        if len(self._buf) - off >= LOG_OVERHEAD:
            size = LOG_OVERHEAD + _LENGTH.unpack_from(self._buf, off + 8)[0]
            if len(self._buf) - off < size <= left:
                self._read(pos, max(size, min(BATCH_CHUNK, left)))
                off = 0
        return self._buf, off

    def may_be_plain(self, pos: int) -> bool:
        """False if the buffer shows the batch at ``pos`` is transactional or control: the
        caller goes straight to the reference code (a run would refuse it, at a cost that
        a log of transactional batches paid per batch)."""
        off = pos - self._start
        return not (off >= 0 and off + 23 <= len(self._buf) and self._buf[off + 22] & _SKIP)

    def batch(self, pos: int) -> RecordBatch | None:
        """The batch at ``pos`` (CorruptRecordError as FileRecords.batches raises it), or None
        at the end or before a partial trailing batch."""
        at = self._header_at(pos)
        if at is None:
            return None
        off, left = at
        h = parse_header(self._buf, off, pos, left, self._path)
        if h is None:
            return None
        if off + h.size > len(self._buf):
            self._read(pos, max(h.size, min(BATCH_CHUNK, left)))
            off = 0
        view = self._buf[off : off + h.size]
        if crc32c(view[CRC_START:]) != h.crc:
            raise CorruptRecordError(
                f"CRC mismatch: stored 0x{h.crc:08x}, computed "
                f"0x{crc32c(view[CRC_START:]):08x}", pos, self._path,
            )
        return RecordBatch(view, pos)
