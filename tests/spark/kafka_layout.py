"""Write partition directories in Kafka's on-disk layout from RecordBatchBuilder batches.

Test helper (no Spark needed): segments ``<20-digit base>.log`` rolled at ``segment_bytes``,
a sparse ``.index`` entry every ``index_interval_bytes`` and the matching ``.timeindex``
entries (largest timestamp so far, offset of that timestamp), optionally preallocated
(zero-filled) like an active segment's indexes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder

Row = tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


@dataclass
class _Segment:
    base: int
    log: bytearray = field(default_factory=bytearray)
    index: bytearray = field(default_factory=bytearray)
    tindex: bytearray = field(default_factory=bytearray)
    since_entry: int = 0
    max_ts: int = -1
    offset_of_max: int = -1


class PartitionWriter:
    """Appends batches to a partition dir the way Kafka's LogSegment lays them out."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = 1 << 30,
        index_interval_bytes: int = 4096,
        preallocate_index_entries: int = 0,
        start_offset: int = 0,
    ) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self.prealloc = preallocate_index_entries
        self.next_offset = start_offset
        self.segments: list[_Segment] = [_Segment(start_offset)]

    def append_batch(self, raw: bytes) -> RecordBatch:
        buf = bytearray(raw)
        batch = RecordBatch(buf)
        batch.set_base_offset(self.next_offset)
        seg = self.segments[-1]
        if seg.log and len(seg.log) + len(buf) > self.segment_bytes:
            seg = _Segment(self.next_offset)
            self.segments.append(seg)
        if batch.max_timestamp > seg.max_ts:
            seg.max_ts, seg.offset_of_max = batch.max_timestamp, batch.last_offset
        # LogSegment.append: an entry (batch last offset, position) once index.interval.bytes
        # were written since the last entry (the first batch needs none: position 0).
        if seg.since_entry > self.index_interval_bytes:
            seg.index += struct.pack(">ii", batch.last_offset - seg.base, len(seg.log))
            self._time_entry(seg)
            seg.since_entry = 0
        seg.log += buf
        seg.since_entry += len(buf)
        self.next_offset = batch.next_offset
        return RecordBatch(bytes(buf))

    @staticmethod
    def _time_entry(seg: _Segment) -> None:
        last_ts = struct.unpack_from(">q", seg.tindex, len(seg.tindex) - 12)[0] if seg.tindex else -1
        if seg.max_ts > last_ts:
            seg.tindex += struct.pack(">qi", seg.max_ts, seg.offset_of_max - seg.base)

    def append(
        self,
        rows: Iterable[Row],
        compression: CompressionType = CompressionType.NONE,
    ) -> RecordBatch:
        b = RecordBatchBuilder(compression)
        for ts, key, value, headers in rows:
            b.append(ts, key, value, headers)
        return self.append_batch(b.build())

    def flush(self) -> None:
        """Write every file; the last segment's indexes get the preallocated zero tail."""
        for i, seg in enumerate(self.segments):
            name = f"{seg.base:020d}"
            (self.dir / f"{name}.log").write_bytes(bytes(seg.log))
            if i < len(self.segments) - 1:
                self._time_entry(seg)  # on roll Kafka appends (maxTimestampSoFar, offsetOfMax)
            idx, tidx = bytes(seg.index), bytes(seg.tindex)
            if i == len(self.segments) - 1 and self.prealloc:
                idx += b"\0" * (8 * self.prealloc)
                tidx += b"\0" * (12 * self.prealloc)
            (self.dir / f"{name}.index").write_bytes(idx)
            (self.dir / f"{name}.timeindex").write_bytes(tidx)


def write_partition(
    directory: Path,
    batches: Iterable[Sequence[Row]],
    *,
    compression: CompressionType = CompressionType.NONE,
    **kwargs: int,
) -> PartitionWriter:
    w = PartitionWriter(directory, **kwargs)
    for rows in batches:
        w.append(rows, compression)
    w.flush()
    return w
