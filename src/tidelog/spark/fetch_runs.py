"""Broker-mode reads without a Python step per batch: a fetch response's records section is
indexed in one walk and handed to the columnar decoder where it lies.

``batch_spans`` reads the header fields of every complete batch of the section (the native
core's walk, or its twin ``batch_spans_py``: records/batch.py iter_batches' rules, CRC
checked); ``select`` then picks, with array operations, the batches the per-batch loop
(KafkaClient.iter_batches) would yield: past the fetch position, below the end, not in an
aborted transaction (read_committed, Kafka's consumer rules as client/txn.py AbortedFilter
applies them), and, for the Arrow columns, not control batches. Only compressed batches and
the ABORT markers of producers with aborted transactions take a Python step each.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numpy as np

from tidelog._native import core as _native_core
from tidelog.client.kafka_client import KafkaClient, TopicPartition, grown_fetch_size
from tidelog.records import RecordBatch
from tidelog.records.batch import (
    _HEADER,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_START,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_LENGTH_FIELD,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
    Buffer,
    ControlRecordType,
    crc32c,
)
from tidelog.records.errors import CorruptRecordError

SPAN_FIELDS = 7  # position, size, base offset, last offset delta, attributes, producer id, count
POS, SIZE, BASE, DELTA, ATTRS, PID, COUNT = range(SPAN_FIELDS)
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_SAFE_OFFSET = 2**62  # beyond it base + delta could wrap in int64: the exact loop is used


def batch_spans_py(buf: Buffer) -> tuple[bytes, int, int, int, int]:
    """(int64 rows of SPAN_FIELDS, problem, position, a, b) for the complete batches of
    ``buf``. A partial trailing batch ends the walk quietly; a problem stops it at the bad
    batch's position: 1 length field ``a`` below the minimum, 2 size ``a`` below a batch
    header, 3 magic ``a``, 4 CRC stored ``a`` / computed ``b``."""
    mv = memoryview(buf).cast("B")
    limit, pos = len(mv), 0
    rows: list[tuple[int, ...]] = []
    problem, a, b = 0, 0, 0
    while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
        (length,) = _I32.unpack_from(mv, pos + 8)
        if length < MIN_LENGTH_FIELD:
            problem, a = 1, length
            break
        size = LOG_OVERHEAD + length
        if pos + size > limit:
            break
        if size < RECORD_BATCH_OVERHEAD:
            problem, a = 2, size
            break
        if mv[pos + 16] != MAGIC_V2:
            problem, a = 3, mv[pos + 16]
            break
        (stored,) = _U32.unpack_from(mv, pos + 17)
        computed = crc32c(mv[pos + CRC_START : pos + size])
        if stored != computed:
            problem, a, b = 4, stored, computed
            break
        h = _HEADER.unpack_from(mv, pos)
        rows.append((pos, size, h[0], h[6], h[5], h[9], h[12]))
        pos += size
    return np.array(rows, dtype=np.int64).reshape(-1, SPAN_FIELDS).tobytes(), problem, pos, a, b


def _batch_spans_native(buf: Buffer) -> tuple[bytes, int, int, int, int]:
    """The native twin of ``batch_spans_py``: the same rows, problem and position."""
    assert _native_core is not None
    raw, problem, pos, a, b = _native_core.batch_spans(buf)
    return raw, problem, pos, a, b


_batch_spans = _batch_spans_native if hasattr(_native_core, "batch_spans") else batch_spans_py


def batch_spans(buf: Buffer) -> tuple[np.ndarray, CorruptRecordError | None]:
    """The header rows (n x SPAN_FIELDS int64) of the complete batches of a records section,
    up to the first bad one, and the CorruptRecordError iter_batches raises there (None when
    every batch is sound): raised only if a read reaches that batch."""
    raw, problem, pos, a, b = _batch_spans(buf)
    rows = np.frombuffer(raw, dtype=np.int64).reshape(-1, SPAN_FIELDS)
    if not problem:
        return rows, None
    message = {
        1: f"batch length field {a} is below the minimum {MIN_LENGTH_FIELD}",
        2: f"batch size {a} is below the minimum {RECORD_BATCH_OVERHEAD}",
        3: f"unsupported magic {a}",
        4: f"CRC mismatch: stored 0x{a:08x}, computed 0x{b:08x}",
    }[problem]
    return rows, CorruptRecordError(message, pos, None)


class AbortedRuns:
    """client/txn.py AbortedFilter over whole runs: the same state (pending aborted
    transactions by first offset, producers inside one) moved as if each batch had been
    asked about in turn."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, int]] = []  # (first_offset, producer_id), a heap
        self._seen: set[tuple[int, int]] = set()
        self._aborting: set[int] = set()

    def add(self, aborted: Iterable[tuple[int, int]]) -> None:
        for producer_id, first_offset in aborted:
            if (first_offset, producer_id) not in self._seen:  # a refetch repeats the list
                self._seen.add((first_offset, producer_id))
                heapq.heappush(self._pending, (first_offset, producer_id))

    def is_aborted(self, pid: int, last: int, attrs: int, control_type: Callable[[], int | None]) -> bool:
        """AbortedFilter.is_aborted for one batch's fields."""
        if pid < 0:
            return False
        while self._pending and self._pending[0][0] <= last:
            self._aborting.add(heapq.heappop(self._pending)[1])
        if attrs & CONTROL_MASK:
            if control_type() == ControlRecordType.ABORT:
                self._aborting.discard(pid)
            return False
        return bool(attrs & TRANSACTIONAL_MASK) and pid in self._aborting

    def mask(self, rows: np.ndarray, control_type: Callable[[int], int | None]) -> np.ndarray:
        """Which of ``rows`` (in offset order, last offsets increasing) belong to aborted
        transactions; ``control_type(i)`` reads row i's control type."""
        out = np.zeros(len(rows), dtype=bool)
        q = np.flatnonzero(rows[:, PID] >= 0)  # only these batches move the state
        if not len(q):
            return out
        lasts = rows[q, BASE] + rows[q, DELTA]
        started: dict[int, list[int]] = {}  # producer -> where its aborted transactions start
        while self._pending and self._pending[0][0] <= lasts[-1]:
            first, pid = heapq.heappop(self._pending)
            started.setdefault(pid, []).append(int(np.searchsorted(lasts, first, "left")))
        relevant = set(started) | self._aborting
        if not relevant:
            return out
        pids, attrs = rows[q, PID], rows[q, ATTRS]
        mine = np.isin(pids, np.fromiter(relevant, np.int64, len(relevant)))
        control = (attrs & CONTROL_MASK) != 0
        markers: dict[int, list[int]] = {}
        for j in np.flatnonzero(mine & control).tolist():
            if control_type(int(q[j])) == ControlRecordType.ABORT:
                markers.setdefault(int(pids[j]), []).append(j)
        data = mine & ~control & ((attrs & TRANSACTIONAL_MASK) != 0)
        for pid in relevant:
            starts = np.array(started.get(pid, []), dtype=np.int64)
            ends = np.array(markers.get(pid, []), dtype=np.int64)
            was = pid in self._aborting
            d = np.flatnonzero(data & (pids == pid))
            if len(d):
                out[q[d]] = _inside(starts, ends, d, was)
            if _inside(starts, ends, np.array([len(q)]), was)[0]:
                self._aborting.add(pid)
            else:
                self._aborting.discard(pid)
        return out


def _inside(starts: np.ndarray, ends: np.ndarray, at: np.ndarray, was: bool) -> np.ndarray:
    """Whether a producer is inside an aborted transaction at each index of ``at``: its
    latest start at or before the index is not followed by an ABORT marker before it (a
    marker at the start's own batch ends it: the start is taken first), or, with no start
    yet, it was inside one already and no marker came."""
    ls = np.searchsorted(starts, at, "right") - 1
    lm = np.searchsorted(ends, at, "left") - 1
    start = starts[np.maximum(ls, 0)] if len(starts) else np.zeros(len(at), np.int64)
    marker = ends[np.maximum(lm, 0)] if len(ends) else np.zeros(len(at), np.int64)
    ended = (lm >= 0) & (marker >= start)
    return np.where(ls >= 0, ~ended, was & (lm < 0))


class Selection(NamedTuple):
    keep: np.ndarray  # rows to decode (data batches with records), in order
    position: int  # the next fetch position
    progressed: bool
    done: bool  # a batch at or past the end was reached


def select(rows: np.ndarray, buf: Buffer, position: int, end: int,
           aborted: AbortedRuns | None) -> Selection:
    """What KafkaClient.iter_batches and the Arrow builder would take from these batches."""
    lasts = rows[:, BASE] + rows[:, DELTA]
    exact = len(rows) < 2 or bool(np.all(np.diff(lasts) > 0))
    if not exact or (len(rows) and (np.abs(rows[:, BASE]).max() >= _SAFE_OFFSET
                                    or np.abs(rows[:, DELTA]).max() >= _SAFE_OFFSET)):
        return _select_loop(rows, buf, position, end, aborted)
    first = int(np.searchsorted(lasts, position, "left"))
    past = np.flatnonzero(rows[first:, BASE] >= end)
    stop = first + int(past[0]) if len(past) else len(rows)
    considered = rows[first:stop]
    if not len(considered):
        return Selection(np.zeros(0, np.int64), position, False, bool(len(past)))
    yielded = np.ones(len(considered), dtype=bool)
    if aborted is not None:
        yielded = ~aborted.mask(considered, lambda i: _control_type(buf, considered[i]))
    keep = yielded & ((considered[:, ATTRS] & CONTROL_MASK) == 0) & (
        considered[:, SIZE] > RECORD_BATCH_OVERHEAD)
    return Selection(first + np.flatnonzero(keep), int(lasts[stop - 1]) + 1, True, bool(len(past)))


def _select_loop(rows: np.ndarray, buf: Buffer, position: int, end: int,
                 aborted: AbortedRuns | None) -> Selection:
    """``select`` batch by batch, for runs whose offsets do not rise (never a broker's)."""
    keep: list[int] = []
    progressed = False
    for i, row in enumerate(rows.tolist()):
        last = row[BASE] + row[DELTA]
        if last < position:
            continue
        if row[BASE] >= end:
            return Selection(np.array(keep, np.int64), position, progressed, True)
        progressed = True
        position = last + 1
        if aborted is not None and aborted.is_aborted(
                row[PID], last, row[ATTRS], _reader(buf, row)):
            continue
        if not row[ATTRS] & CONTROL_MASK and row[SIZE] > RECORD_BATCH_OVERHEAD:
            keep.append(i)
    return Selection(np.array(keep, np.int64), position, progressed, False)


def _reader(buf: Buffer, row: list[int]) -> Callable[[], int | None]:
    return lambda: _control_type(buf, row)


def _control_type(buf: Buffer, row: np.ndarray | list[int]) -> int | None:
    pos, size = int(row[POS]), int(row[SIZE])
    return RecordBatch(memoryview(buf)[pos : pos + size]).control_type()


class Run(NamedTuple):
    """Batches of one fetch response to decode: ``rows`` index ``records``; ``payloads``
    holds the decompressed records of compressed batches (None for the others)."""

    records: Buffer
    rows: np.ndarray
    payloads: list[Buffer | None]


def payloads_of(buf: Buffer, rows: np.ndarray) -> list[Buffer | None]:
    out: list[Buffer | None] = [None] * len(rows)
    mv = memoryview(buf)
    for i in np.flatnonzero(rows[:, ATTRS] & COMPRESSION_MASK).tolist():
        pos, size = int(rows[i, POS]), int(rows[i, SIZE])
        out[i] = RecordBatch(mv[pos : pos + size]).records_payload()
    return out


def runs_of(records: Buffer, rows: np.ndarray, keep: np.ndarray) -> Run:
    chosen = rows[keep]
    return Run(records, chosen, payloads_of(records, chosen))


def fetch_runs(client: KafkaClient, tp: TopicPartition, start: int, end: int, *,
               partition_max_bytes: int = 8 << 20, isolation_level: int = 0) -> Iterator[Run]:
    """The data batches covering [start, end) of one partition, a fetch response at a time:
    KafkaClient.iter_batches' loop (the same fetches, positions, read_committed filtering
    and end conditions) without its per-batch objects, control batches left out."""
    position = start
    aborted = AbortedRuns() if isolation_level else None
    while position < end:
        fetched = client.fetch_partition(tp, position, partition_max_bytes=partition_max_bytes,
                                         isolation_level=isolation_level)
        if aborted is not None:
            aborted.add(fetched.aborted_transactions)
        rows, corrupt = batch_spans(fetched.records)
        sel = select(rows, fetched.records, position, end, aborted)
        if corrupt is not None and not sel.done:
            raise corrupt
        if len(sel.keep):
            yield runs_of(fetched.records, rows, sel.keep)
        position = sel.position
        if sel.done:
            return
        if not sel.progressed:
            grown = grown_fetch_size(fetched, position, partition_max_bytes)
            if grown is None:
                return
            partition_max_bytes = grown
