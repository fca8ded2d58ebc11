"""Read-only access to Kafka partition directories (offline tools, the Spark ``path`` mode).

Never writes, never takes the log dir's ``.lock``: it works on a copy of a stopped broker's
directories and on the directories of a running broker. A running broker appends to the
active segment while we read it, so every read stops at a partial trailing batch (and at a
CRC mismatch in the very last batch of the last segment: bytes still arriving), exactly like
Kafka's FileLogInputStream stops quietly at a partial batch.

Layout facts (reference/kafka-log-layer.md §1): segments ``<20-digit base>.log`` with sparse
``.index`` (8-byte entries: int32 relative offset, int32 position) and ``.timeindex``
(12-byte entries: int64 timestamp, int32 relative offset); both indexes may be preallocated
and zero-filled past their last entry.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tidelog.records import CorruptRecordError, Record, RecordBatch
from tidelog.records.batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_LENGTH_FIELD
from tidelog.util.topic_partition import TopicPartition, parse_topic_partition_name

from .reader_txn import (
    TXN_INDEX_SUFFIX,
    TxnState,
    filter_aborted,
    merge_aborted,
    newest_snapshot,
    read_txn_index,
    scan_transactions,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_SKIPPED_DIR_SUFFIXES = ("-delete", "-future", "-stray")
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LENGTH = struct.Struct(">i")
DEFAULT_CHUNK_BYTES = 1 << 20
KRAFT_METADATA_TOPIC = "__cluster_metadata"


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """The files of one segment; index files may be missing (created lazily by Kafka)."""

    base_offset: int
    log_path: Path

    @property
    def index_path(self) -> Path:
        return self.log_path.with_suffix(INDEX_SUFFIX)

    @property
    def time_index_path(self) -> Path:
        return self.log_path.with_suffix(TIME_INDEX_SUFFIX)


def _read_entries(path: Path, entry: struct.Struct) -> list[tuple[int, ...]]:
    """All real entries of an index file; a zero relative offset after the first entry is the
    zero-filled tail of a preallocated index (relative offsets strictly increase from 0)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    n = len(data) // entry.size
    rel_pos = 0 if entry is _INDEX_ENTRY else 1
    out: list[tuple[int, ...]] = []
    for i in range(n):
        fields = entry.unpack_from(data, i * entry.size)
        if i > 0 and fields[rel_pos] == 0:
            break
        if i == 0 and entry is _TIME_ENTRY and fields == (0, 0):
            break  # an empty preallocated time index
        out.append(fields)
    return out


def _floor_entry(entries: list[tuple[int, ...]], key_pos: int, target: int) -> tuple[int, ...] | None:
    """The last entry whose field ``key_pos`` is <= target (entries sorted on that field)."""
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if entries[mid][key_pos] <= target:
            lo = mid + 1
        else:
            hi = mid
    return entries[lo - 1] if lo else None


class PartitionReader:
    """One ``<topic>-<partition>`` directory, read-only."""

    def __init__(self, directory: Path | str, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self.dir = Path(directory)
        self.topic_partition = parse_topic_partition_name(self.dir.name)
        self.chunk_bytes = chunk_bytes

    def __repr__(self) -> str:
        return f"PartitionReader({str(self.dir)!r})"

    # -- segments -------------------------------------------------------------------------------
    def segments(self) -> list[SegmentFiles]:
        """Live segments sorted by base offset (suffixed files such as .deleted are ignored)."""
        segs = []
        for name in os.listdir(self.dir):
            m = _SEGMENT_RE.match(name)
            if m:
                segs.append(SegmentFiles(int(m.group(1)), self.dir / name))
        segs.sort(key=lambda s: s.base_offset)
        return segs

    def _start_position(self, seg: SegmentFiles, offset: int) -> int:
        """Byte position of the last indexed batch at or below ``offset`` (0 if none)."""
        if offset <= seg.base_offset:
            return 0
        entry = _floor_entry(_read_entries(seg.index_path, _INDEX_ENTRY), 0, offset - seg.base_offset)
        if entry is None:
            return 0
        position = entry[1]
        try:
            size = seg.log_path.stat().st_size
        except FileNotFoundError:
            return 0
        return position if position <= size else 0  # an index ahead of its log: scan instead

    # -- batches --------------------------------------------------------------------------------
    def iter_segment_batches(
        self, seg: SegmentFiles, position: int = 0, *, is_last: bool = False
    ) -> Iterator[RecordBatch]:
        """Complete, CRC-checked batches of one segment file from ``position``, read in chunks."""
        try:
            f = open(seg.log_path, "rb")  # noqa: SIM115 - closed in finally across yields
        except FileNotFoundError:
            return  # deleted by retention/compaction while we were listing
        try:
            yield from self._iter_file(f, seg, position, is_last)
        finally:
            f.close()

    def _iter_file(
        self, f: BinaryIO, seg: SegmentFiles, position: int, is_last: bool
    ) -> Iterator[RecordBatch]:
        fd = f.fileno()
        path = str(seg.log_path)
        buf = b""
        pos = position  # file position of buf[0]
        want = self.chunk_bytes
        while True:
            more = os.pread(fd, want, pos + len(buf))
            if not more:
                return
            buf = buf + more if buf else more
            at_eof = len(more) < want or pos + len(buf) >= os.fstat(fd).st_size
            consumed, need = yield from self._split(buf, pos, path, is_last, eof_hint=at_eof)
            if consumed < 0:
                return
            buf = buf[consumed:]
            pos += consumed
            want = max(self.chunk_bytes, need - len(buf))

    def _split(
        self, buf: bytes, file_pos: int, path: str, is_last: bool, eof_hint: bool
    ) -> Generator[RecordBatch, None, tuple[int, int]]:
        """Yield the complete batches of ``buf``; return (bytes consumed, bytes needed next)
        or (-1, 0) when the data ends (zero-filled tail or a torn final batch)."""
        mv = memoryview(buf)
        p = 0
        while len(buf) - p > HEADER_SIZE_UP_TO_MAGIC:
            (length,) = _LENGTH.unpack_from(buf, p + 8)
            if length == 0 and not any(buf[p : p + LOG_OVERHEAD]):
                return -1, 0  # zero-filled tail of a preallocated segment
            if length < MIN_LENGTH_FIELD:
                raise CorruptRecordError(
                    f"batch length field {length} is below the minimum {MIN_LENGTH_FIELD}",
                    file_pos + p,
                    path,
                )
            size = LOG_OVERHEAD + length
            if p + size > len(buf):
                return p, size
            batch = RecordBatch(mv[p : p + size], file_pos + p)
            if not batch.is_valid():
                if is_last and eof_hint and p + size == len(buf):
                    return -1, 0  # the final batch of the active segment is still being written
                batch.ensure_valid(path)
            yield batch
            p += size
        return p, 0

    def read_batches(self, start_offset: int = 0, end_offset: int | None = None) -> Iterator[RecordBatch]:
        """Batches holding offsets in [start_offset, end_offset), across segments, seeking with
        the offset index. The first batch may start below ``start_offset`` (filter records)."""
        segs = self.segments()
        first = 0
        for i, seg in enumerate(segs):
            if seg.base_offset <= start_offset:
                first = i
        for i in range(first, len(segs)):
            seg = segs[i]
            if end_offset is not None and seg.base_offset >= end_offset:
                return
            position = self._start_position(seg, start_offset)
            for batch in self.iter_segment_batches(seg, position, is_last=i == len(segs) - 1):
                if end_offset is not None and batch.base_offset >= end_offset:
                    return
                if batch.last_offset >= start_offset:
                    yield batch

    def read_records(
        self, start_offset: int = 0, end_offset: int | None = None, *, include_control: bool = False
    ) -> Iterator[tuple[RecordBatch, Record]]:
        """(batch, record) pairs for offsets in [start_offset, end_offset)."""
        for batch in self.read_batches(start_offset, end_offset):
            if batch.is_control and not include_control:
                continue
            for rec in batch.iter_records():
                if rec.offset < start_offset:
                    continue
                if end_offset is not None and rec.offset >= end_offset:
                    return
                yield batch, rec

    # -- offsets --------------------------------------------------------------------------------
    def earliest_offset(self) -> int:
        """Kafka's log start offset: max(first segment base, log-start-offset-checkpoint)."""
        segs = self.segments()
        base = segs[0].base_offset if segs else 0
        return max(base, self._checkpointed_start() or 0)

    def _checkpointed_start(self) -> int | None:
        path = self.dir.parent / LOG_START_OFFSET_CHECKPOINT
        try:
            lines = path.read_text().splitlines()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        tp = self.topic_partition
        for line in lines[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] == tp.topic and parts[1] == str(tp.partition):
                return int(parts[2])
        return None

    def latest_offset(self) -> int:
        """The log end offset: one past the last complete batch (the last segment's base when empty)."""
        segs = self.segments()
        for seg in reversed(segs):
            entries = _read_entries(seg.index_path, _INDEX_ENTRY)
            position = self._start_position(seg, seg.base_offset + entries[-1][0]) if entries else 0
            end = None
            for batch in self.iter_segment_batches(seg, position, is_last=seg is segs[-1]):
                end = batch.next_offset
            if end is not None:
                return end
            if seg is segs[-1] and seg.log_path.exists():
                return seg.base_offset  # an empty active segment: LEO is its base
        return self.earliest_offset()

    # -- read_committed (reader_txn.py) --------------------------------------------------------
    def transaction_state(self) -> TxnState:
        """The visible end, last stable offset and aborted transactions (of the scanned part),
        rebuilt from the newest readable producer snapshot and the batches after it."""
        leo = self.latest_offset()
        log_start = self.earliest_offset()
        found = newest_snapshot(self.dir, leo)
        start, ongoing = found if found is not None else (log_start, {})
        state = scan_transactions(self.read_batches(start), start, ongoing, leo)
        # UnifiedLog keeps the first unstable offset at or above the log start offset
        state.last_stable_offset = max(state.last_stable_offset, min(log_start, state.log_end_offset))
        return state

    def last_stable_offset(self) -> int:
        """Kafka's LSO as a read_committed consumer sees it (ListOffsets latest)."""
        return self.transaction_state().last_stable_offset

    def read_committed_batches(
        self, start_offset: int = 0, end_offset: int | None = None, *, state: TxnState | None = None
    ) -> Iterator[RecordBatch]:
        """``read_batches`` at isolation level read_committed: stops at the last stable offset
        and leaves out the data batches of aborted transactions (control batches stay).
        ``state``: an earlier ``transaction_state()`` of this partition, to save a scan (an
        older one is safe: its LSO only lags, and every transaction below it was complete)."""
        state = state or self.transaction_state()
        upper = state.last_stable_offset if end_offset is None else min(end_offset, state.last_stable_offset)
        # a marker at or above start_offset lives in the segment holding start_offset or later
        segs = self.segments()
        first = max((i for i, s in enumerate(segs) if s.base_offset <= start_offset), default=0)
        indexed = [t for seg in segs[first:]
                   for t in read_txn_index(seg.log_path.with_suffix(TXN_INDEX_SUFFIX))]
        aborted = merge_aborted(indexed, state.aborted)
        return filter_aborted(self.read_batches(start_offset, upper), aborted, start_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, record timestamp) of the first record with timestamp >= ``timestamp``
        (Kafka's fetchOffsetByTimestamp for a regular timestamp), or None."""
        start = self.earliest_offset()
        segs = self.segments()
        for i, seg in enumerate(segs):
            entries = _read_entries(seg.time_index_path, _TIME_ENTRY)
            is_last = i == len(segs) - 1
            if entries and not is_last and entries[-1][0] < timestamp:
                continue  # a rolled segment's last entry is its largest timestamp
            floor = _floor_entry(entries, 0, timestamp)
            from_offset = max(start, seg.base_offset + floor[1] if floor else seg.base_offset)
            position = self._start_position(seg, from_offset)
            for batch in self.iter_segment_batches(seg, position, is_last=is_last):
                if batch.is_control or batch.max_timestamp < timestamp or batch.last_offset < start:
                    continue
                for rec in batch.iter_records():
                    if rec.offset >= start and rec.timestamp >= timestamp:
                        return rec.offset, rec.timestamp
        return None


class LogDirReader:
    """All partitions under one or several log dirs (Kafka's ``log.dirs``), read-only."""

    def __init__(self, log_dirs: Iterable[Path | str] | Path | str) -> None:
        if isinstance(log_dirs, (str, Path)):
            log_dirs = [log_dirs]
        self.log_dirs = [Path(d) for d in log_dirs]
        for d in self.log_dirs:
            if not d.is_dir():
                raise FileNotFoundError(f"log dir {str(d)!r} does not exist or is not a directory")

    def partitions(self) -> dict[TopicPartition, PartitionReader]:
        """Every live partition dir; ``-delete``/``-future``/``-stray`` dirs are skipped."""
        found: dict[TopicPartition, PartitionReader] = {}
        for root in self.log_dirs:
            for entry in sorted(os.scandir(root), key=lambda e: e.name):
                if not entry.is_dir() or entry.name.endswith(_SKIPPED_DIR_SUFFIXES):
                    continue
                try:
                    tp = parse_topic_partition_name(entry.name)
                except ValueError:
                    continue  # not a partition dir
                if tp.topic == KRAFT_METADATA_TOPIC:
                    continue  # KRaft's own log, not a user topic
                if tp in found:
                    raise ValueError(
                        f"partition {tp} is present in two log dirs: {found[tp].dir} and {entry.path}"
                    )
                found[tp] = PartitionReader(entry.path)
        return found

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in self.partitions():
            out.setdefault(tp.topic, []).append(tp.partition)
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def partition(self, tp: TopicPartition) -> PartitionReader:
        try:
            return self.partitions()[tp]
        except KeyError:
            raise KeyError(f"partition {tp} not found under {[str(d) for d in self.log_dirs]}") from None
