"""Helpers of the bucket path-mode tests: a real Log written by tidelog.storage (several
segments, compressed batches, headers, transactions with an abort) and its closed segments
copied to a bucket through storage/remote's RemoteStorageManager, as the broker's
RemoteLogManager copies them."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.storage.log import AppendOrigin, Log
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.storage.remote.storage_manager import LogSegmentData
from tidelog.util.clock import ManualClock

T0 = 1_700_000_000_000
CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.SNAPPY)


def _data_batch(i: int, pid: int | None = None, seq: int = -1, tag: str = "value") -> bytes:
    codec = CODECS[i % len(CODECS)]
    b = RecordBatchBuilder(codec, producer_id=-1 if pid is None else pid,
                           producer_epoch=-1 if pid is None else 0,
                           base_sequence=seq, is_transactional=pid is not None)
    for j in range(4):
        n = i * 4 + j
        key = None if n % 5 == 0 else f"k{n}".encode()
        headers = [("h", f"{n}".encode()), ("null", None)] if n % 2 else []
        b.append(T0 + n * 10, key, f"{tag}-{n}-{'x' * (n % 50)}".encode(), headers)
    return b.build()


def _marker(pid: int, kind: ControlRecordType, i: int) -> bytes:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)
    b.append_control(kind, T0 + i * 40)
    return b.build()


def write_log(directory: Path, batches: int = 40, roll_every: int = 7, tag: str = "value") -> Log:
    """A partition dir written by a real Log: ``batches`` data batches (codecs in turn), a
    transaction of producer 7 aborted and one of producer 8 committed every few batches,
    rolled every ``roll_every`` batches; the last segment stays active. Returns the closed
    Log (reopen it to append more)."""
    log = Log.open(directory, LogConfig.from_props({"index.interval.bytes": "200"}), clock=ManualClock(T0))
    seqs = {7: 0, 8: 0}
    try:
        for i in range(batches):
            pid = {2: 7, 4: 8}.get(i % 6)  # 7's transactions are aborted, 8's committed
            if pid is not None:
                log.append_as_leader(_data_batch(i, pid, seqs[pid], tag))
                seqs[pid] += 4
            else:
                log.append_as_leader(_data_batch(i, tag=tag))
            if i % 6 == 3:  # the ABORT marker a batch after its data
                log.append_as_leader(_marker(7, ControlRecordType.ABORT, i), origin=AppendOrigin.COORDINATOR)
            if i % 6 == 5:
                log.append_as_leader(_marker(8, ControlRecordType.COMMIT, i), origin=AppendOrigin.COORDINATOR)
            if i % roll_every == roll_every - 1:
                log.roll()
        log.flush()
    finally:
        log.close()
    return log


@dataclass(frozen=True)
class Uploaded:
    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData


def closed_segments(directory: Path) -> list[tuple[int, int]]:
    """(base offset, next base offset) of every closed segment of a partition dir."""
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    return list(itertools.pairwise(bases))


def segment_data(directory: Path, base: int, next_base: int) -> LogSegmentData:
    stem = directory / f"{base:020d}"
    txn = stem.with_suffix(".txnindex")
    return LogSegmentData(stem.with_suffix(".log"), stem.with_suffix(".index"),
                          stem.with_suffix(".timeindex"), txn if txn.exists() and txn.stat().st_size else None,
                          directory / f"{next_base:020d}.snapshot", f"0\n1\n0 {base}\n".encode())


def upload(rsm: RemoteStorageManager, directory: Path, tip: TopicIdPartition,
           segments: list[tuple[int, int]] | None = None,
           segment_id: uuid.UUID | None = None) -> list[Uploaded]:
    """Copy closed segments of ``directory`` through the RemoteStorageManager."""
    out = []
    for base, next_base in segments if segments is not None else closed_segments(directory):
        data = segment_data(directory, base, next_base)
        sid = RemoteLogSegmentId(tip, segment_id) if segment_id else RemoteLogSegmentId.generate_new(tip)
        metadata = RemoteLogSegmentMetadata(sid, base, next_base - 1, T0, 1, T0, {0: base},
                                            data.log_segment.stat().st_size)
        rsm.copy_log_segment_data(metadata, data)
        out.append(Uploaded(metadata, data))
    return out
