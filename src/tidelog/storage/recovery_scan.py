"""The recovery scan of a segment (LogSegment.recover's walk), with a compiled fast path.

``RecoveryScan.recover_batch`` is the reference (Kafka's LogSegment.recover loop body): per
batch it checks the offset range, keeps
the largest timestamp, appends the sparse index entries, and replays the leader epoch and
the producer state. Doing that in Python costs a few microseconds per batch, which made
recovery a multiple of a read of the same file. ``scan_run`` (``_core.recover_scan`` or its
pure-Python twin ``scan_run_py``) runs the same steps over a buffer of whole batches and
stops *before* the first batch it does not take the common way: a header that is malformed
or runs past the buffer, a CRC mismatch, an offset outside the segment's range, an index
entry the index would refuse (full, or out of order). The driver (``recover_batches``)
hands that one batch to the reference code, which raises the exact error (file, byte
position, message) or handles the rare case, then resumes the fast path. The fast path
never raises, so the errors are the reference's by construction; what it commits per batch
equals the reference's effect, which the twin tests check on valid, truncated and corrupted
segments.

The native run checks the CRCs of a buffer's batches without holding the GIL, so the
recovery threads of a data dir (``num.recovery.threads.per.data.dir``) recover partitions in
parallel; the segment is mapped read-only and scanned in large sequential chunks straight
from the page cache (no copy: the copy cost as much as the CRCs), or read in such chunks
with the next one read ahead where it cannot be mapped.

A run returns the index entries it adds as packed bytes (appended to the indexes in bulk),
the leader epochs to assign, and the positions of the batches with a producer id (replayed
by the reference's producer-state code, in order: the producer state is independent of the
indexes and of the epoch cache).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol

from tidelog._native import core
from tidelog.records import RECORD_BATCH_OVERHEAD, RecordBatch, crc32c
from tidelog.records.batch import (
    CONTROL_MASK,
    CRC_START,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_LENGTH_FIELD,
    TRANSACTIONAL_MASK,
)
from tidelog.records.errors import CorruptRecordError

from .file_records import BatchHeader, Buffer, FileRecords, _pread_exact, parse_header
from .index.offset_index import OffsetIndex
from .index.time_index import TimeIndex, TimestampOffset
from .index.txn_index import AbortedTxn, TransactionIndex
from .producer_state import NUM_BATCHES_TO_RETAIN

if TYPE_CHECKING:
    from .leader_epoch import LeaderEpochFileCache
    from .producer_state import ProducerStateManager

INT32_MAX = 2**31 - 1
READ_CHUNK = 8 * 1024 * 1024  # recovery reads: large and sequential
LONG_MAX = 2**63 - 1
NO_EPOCH_CACHE = 2**31  # above every int32 epoch: nothing to assign
_FIELDS = struct.Struct(">qiibI2xi8xqq")  # base, length, epoch, magic, crc, delta, max ts, pid
_OFFSET_ENTRY = struct.Struct(">ii")
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER = struct.Struct(">qh")  # producer id, producer epoch
ATTRIBUTES_AT, PRODUCER_AT = 21, 43  # header positions (records/batch.py)
_TIME_ENTRY = struct.Struct(">qi")


class ScanState(NamedTuple):
    """What a run starts from (the segment's and its indexes' state before the batch at
    ``off``); a run returns the next one inside ``ScanResult``."""

    valid_bytes: int  # file position of buf[off]
    last_index_entry: int
    max_ts: int  # the segment's largest timestamp so far and its offset
    max_ts_offset: int
    oi_last: int  # last offset in the offset index, -1 if empty
    oi_room: int  # free slots in the offset index
    ti_last_ts: int  # last time index entry ((-1, -1) if empty)
    ti_last_offset: int
    ti_room: int  # slots before the time index is full (Kafka keeps one for the last entry)
    latest_epoch: int  # the epoch cache's latest (-1 if none; NO_EPOCH_CACHE: no cache)


class ScanResult(NamedTuple):
    off: int  # the first batch not taken (buffer offset)
    state: ScanState
    offset_entries: bytes  # packed `.index` entries to append
    time_entries: bytes  # packed `.timeindex` entries to append
    epochs: list[tuple[int, int]]  # (epoch, start offset) to assign, in order
    producer_batches: list[int]  # buffer offsets of the batches with a producer id >= 0
    next_offset: int  # next offset after the last batch taken, -1 if none


def scan_run_py(buf: Buffer, off: int, interval: int, segment_base: int, s: ScanState) -> ScanResult:
    """The pure-Python twin of ``_core.recover_scan`` (the reference for it)."""
    view = memoryview(buf)
    n = len(view)
    (valid, last_entry, mx_ts, mx_off, oi_last, oi_room, ti_ts, ti_off, ti_room, epoch_max) = s
    oi, ti = bytearray(), bytearray()
    epochs: list[tuple[int, int]] = []
    producers: list[int] = []
    next_offset = -1
    while n - off >= RECORD_BATCH_OVERHEAD:
        base, length, epoch, magic, crc, delta, max_ts, pid = _FIELDS.unpack_from(view, off)
        size = LOG_OVERHEAD + length
        if length < MIN_LENGTH_FIELD or size < RECORD_BATCH_OVERHEAD or magic != MAGIC_V2:
            break
        if size > n - off or crc32c(view[off + CRC_START : off + size]) != crc:
            break
        last = base + delta
        if not 0 <= last - segment_base <= INT32_MAX or valid > INT32_MAX or last >= LONG_MAX:
            break
        new_ts, new_off = (max_ts, last) if max_ts > mx_ts else (mx_ts, mx_off)
        if valid - last_entry > interval:
            if oi_room <= 0 or last <= oi_last or ti_room <= 0:
                break
            if new_off < ti_off or new_ts < ti_ts:
                break
            if new_ts > ti_ts and not 0 <= new_off - segment_base <= INT32_MAX:
                break
            oi += _OFFSET_ENTRY.pack(last - segment_base, valid)
            oi_last, oi_room = last, oi_room - 1
            if new_ts > ti_ts:
                ti += _TIME_ENTRY.pack(new_ts, new_off - segment_base)
                ti_ts, ti_off, ti_room = new_ts, new_off, ti_room - 1
            last_entry = valid
        mx_ts, mx_off = new_ts, new_off
        if epoch >= 0 and epoch_max < epoch:
            epochs.append((epoch, base))
            epoch_max = epoch
        if pid >= 0:
            producers.append(off)
        next_offset = last + 1
        valid += size
        off += size
    state = ScanState(valid, last_entry, mx_ts, mx_off, oi_last, oi_room, ti_ts, ti_off, ti_room,
                      epoch_max)
    return ScanResult(off, state, bytes(oi), bytes(ti), epochs, producers, next_offset)


def _scan_run_native(buf: Buffer, off: int, interval: int, segment_base: int, s: ScanState) -> ScanResult:
    """``_core.recover_scan``: the same run in C (tidelog._native)."""
    assert core is not None
    off, state, oi, ti, epochs, producers, next_offset = core.recover_scan(
        buf, off, interval, segment_base, tuple(s))
    return ScanResult(off, ScanState(*state), oi, ti, epochs, producers, next_offset)


scan_run = _scan_run_native if core is not None and hasattr(core, "recover_scan") else scan_run_py


def _map(fd: int, size: int) -> memoryview | None:
    """``size`` bytes of the file mapped read-only, read ahead sequentially; None where it
    cannot be mapped (empty, or a file system without mmap)."""
    if size <= 0:
        return None
    try:
        mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    if hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_SEQUENTIAL)
    return memoryview(mm)


class ScannedSegment(Protocol):
    """What the scan reads and writes of a segment (LogSegment is one): the scan sits
    below the segment, so it types against this rather than importing it."""

    @property
    def log(self) -> FileRecords: ...
    @property
    def offset_index(self) -> OffsetIndex: ...
    @property
    def time_index(self) -> TimeIndex: ...
    @property
    def txn_index(self) -> TransactionIndex: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def index_interval_bytes(self) -> int: ...
    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset: ...

    def set_max_timestamp_and_offset(self, value: TimestampOffset) -> None: ...

    def ensure_offset_in_range(self, offset: int) -> None: ...


class RecoveryScan:
    """Walk a segment's `.log` for LogSegment.recover: fast runs, the reference for the rest.

    ``valid_bytes`` is the end of the last batch taken, also when a batch raises."""

    def __init__(self, segment: ScannedSegment, producer_state: ProducerStateManager | None,
                 epoch_cache: LeaderEpochFileCache | None) -> None:
        self.seg = segment
        self.producer_state = producer_state
        self.epoch_cache = epoch_cache
        self.valid_bytes = 0
        self.last_index_entry = 0
        self._mapped: memoryview | None = None  # the `.log` mapped while ``run`` scans it

    def run(self) -> None:
        """Scan to the end of the valid batches; CorruptRecordError/InvalidRecordError at the
        first invalid one (raised by the reference code, with its position)."""
        log = self.seg.log
        fd, path, limit = log.fileno(), str(log.path), log.size_in_bytes
        self._mapped = _map(fd, limit)
        try:
            self._run(fd, path, limit)
        finally:
            self._mapped = None  # unmapped with the last view of it

    def _run(self, fd: int, path: str, limit: int) -> None:
        buf: Buffer = b""
        buf_start = pos = 0
        while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = self._read(fd, min(READ_CHUNK, limit - pos), pos, path, limit)
                buf_start, off = pos, 0
            off = self._fast_run(buf, off)
            pos = buf_start + off
            if limit - pos <= HEADER_SIZE_UP_TO_MAGIC:
                return
            if off + RECORD_BATCH_OVERHEAD > len(buf) and buf_start + len(buf) < limit:
                continue  # the next header is past the buffer: read on
            h = parse_header(buf, off, pos, limit - pos, path)  # the reference: may raise
            if h is None:
                return  # a partial trailing batch
            if off + h.size > len(buf):  # the batch runs past the buffer: read it whole
                buf = self._read(fd, max(h.size, min(READ_CHUNK, limit - pos)), pos, path, limit)
                buf_start = pos
                continue
            self._slow_batch(memoryview(buf)[off : off + h.size], h, path)
            pos += h.size

    def _read(self, fd: int, size: int, pos: int, path: str, limit: int) -> Buffer:
        """The chunk of the mapped file, else one large sequential read; the kernel is asked
        to read the next chunk ahead meanwhile, so the disk works while the CRCs of this one
        are checked."""
        mapped = self._mapped
        if mapped is not None and pos + size <= len(mapped):
            return mapped[pos : pos + size]
        buf = _pread_exact(fd, size, pos, path)
        ahead = pos + len(buf)
        if ahead < limit and hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, ahead, min(READ_CHUNK, limit - ahead), os.POSIX_FADV_WILLNEED)
        return buf

    def _fast_run(self, buf: Buffer, off: int) -> int:
        seg = self.seg
        oi, ti = seg.offset_index, seg.time_index
        mx = seg.max_timestamp_and_offset_so_far
        ti_last = ti.last_entry if ti.entries else TimestampOffset(-1, -1)
        latest = NO_EPOCH_CACHE if self.epoch_cache is None else self.epoch_cache.latest_epoch()
        state = ScanState(
            self.valid_bytes, self.last_index_entry, mx.timestamp, mx.offset,
            oi.last_offset if oi.entries else -1, oi.max_entries - oi.entries,
            ti_last.timestamp, ti_last.offset, ti.max_entries - 1 - ti.entries,
            -1 if latest is None else latest,
        )
        r = scan_run(buf, off, seg.index_interval_bytes, seg.base_offset, state)
        if r.off == off:
            return off
        s = r.state
        oi.append_packed(r.offset_entries, s.oi_last)
        ti.append_packed(r.time_entries, TimestampOffset(s.ti_last_ts, s.ti_last_offset))
        seg.set_max_timestamp_and_offset(TimestampOffset(s.max_ts, s.max_ts_offset))
        for epoch, start in r.epochs:
            self._assign_epoch(epoch, start)
        file_base = self.valid_bytes - off  # the file position of buf[0]
        self.valid_bytes, self.last_index_entry = s.valid_bytes, s.last_index_entry
        if self.producer_state is not None:
            for p in self._replayed(buf, r.producer_batches):
                h = parse_header(buf, p, file_base + p, len(buf) - p, None)
                assert h is not None  # the fast path took it whole
                self._replay_producer(h, RecordBatch(memoryview(buf)[p : p + h.size], h.position))
            self.producer_state.update_map_end_offset(r.next_offset)
        return r.off

    def _replayed(self, buf: Buffer, positions: list[int]) -> Iterator[int]:
        """``positions`` less the batches whose replay the later ones undo: in a run of
        consecutive plain (neither transactional nor control) batches of one producer and
        epoch, each replay only appends the batch's metadata to the producer's entry, which
        keeps the last NUM_BATCHES_TO_RETAIN, and sets its last timestamp; so replaying the
        run's last five leaves the entry as replaying all of them does. Decided as the run
        is reached (the batches before it replayed): only from an entry of no later epoch and
        no open transaction, where the reference neither warns nor raises for a batch of the
        run; and only for a producer state keeping its entries in ``producers``."""
        entries = getattr(self.producer_state, "producers", None)
        if entries is None or len(positions) <= NUM_BATCHES_TO_RETAIN:
            yield from positions
            return
        keys = [None if _ATTRIBUTES.unpack_from(buf, p + ATTRIBUTES_AT)[0]
                & (TRANSACTIONAL_MASK | CONTROL_MASK)
                else _PRODUCER.unpack_from(buf, p + PRODUCER_AT) for p in positions]
        i, n = 0, len(positions)
        while i < n:
            key, j = keys[i], i + 1
            while key is not None and j < n and keys[j] == key:
                j += 1
            if key is not None and j - i > NUM_BATCHES_TO_RETAIN:
                entry = entries.get(key[0])  # as the batches before the run left it
                if entry is None or (entry.producer_epoch <= key[1]
                                     and entry.current_txn_first_offset is None):
                    i = j - NUM_BATCHES_TO_RETAIN
            yield from positions[i:j]
            i = j

    # -- the reference: one batch --------------------------------------------------------------
    def recover_batch(self, h: BatchHeader, batch: RecordBatch) -> None:
        """One batch the way Kafka's LogSegment.recover loop takes it."""
        seg = self.seg
        base_offset, max_ts = h.base_offset, h.max_timestamp
        last_offset = base_offset + h.last_offset_delta
        seg.ensure_offset_in_range(last_offset)
        mx = seg.max_timestamp_and_offset_so_far
        if max_ts > mx.timestamp:
            mx = TimestampOffset(max_ts, last_offset)
            seg.set_max_timestamp_and_offset(mx)
        if self.valid_bytes - self.last_index_entry > seg.index_interval_bytes:
            seg.offset_index.append(last_offset, self.valid_bytes)
            seg.time_index.maybe_append(mx.timestamp, mx.offset)
            self.last_index_entry = self.valid_bytes
        self.valid_bytes += h.size
        if h.partition_leader_epoch >= 0:
            self._assign_epoch(h.partition_leader_epoch, base_offset)
        if self.producer_state is not None:
            self._replay_producer(h, batch)
            self.producer_state.update_map_end_offset(h.next_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        cache = self.epoch_cache
        if cache is not None:
            latest = cache.latest_epoch()
            if latest is None or latest < epoch:
                cache.assign(epoch, start_offset)

    def _replay_producer(self, h: BatchHeader, batch: RecordBatch) -> None:
        """Replay one batch into the producer state; a completed aborted transaction goes
        into the transaction index (Kafka's LogSegment.updateProducerState)."""
        ps = self.producer_state
        assert ps is not None  # replayed only with a producer state (the callers' check)
        if h.producer_id >= 0:
            completed = ps.update_from_recovered_batch(batch)
            if completed is not None:
                lso = ps.last_stable_offset(completed)
                if getattr(completed, "is_aborted", False):
                    self.seg.txn_index.append(
                        AbortedTxn(completed.producer_id, completed.first_offset,
                                   completed.last_offset, lso)
                    )
                ps.complete_txn(completed)

    def _slow_batch(self, view: memoryview, h: BatchHeader, path: str) -> None:
        if crc32c(view[CRC_START:]) != h.crc:  # as FileRecords.batches_with_headers
            raise CorruptRecordError(
                f"CRC mismatch: stored 0x{h.crc:08x}, computed "
                f"0x{crc32c(view[CRC_START:]):08x}", h.position, path,
            )
        self.recover_batch(h, RecordBatch(view, h.position))
