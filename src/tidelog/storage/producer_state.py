"""Idempotent/transactional producer state per partition (Kafka's ProducerStateManager).

Per producer id: epoch, the metadata of its last 5 batches (duplicate detection), coordinator
epoch and the first offset of its ongoing transaction. The state is derived from the log and
persisted in ``<20-digit offset>.snapshot`` files (Kafka's format, reference §1.12) whose
offset is the exclusive end offset the state reflects.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from sortedcontainers import SortedDict

from tidelog.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatch, crc32c
from tidelog.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, ControlRecordType

from .checkpoints import write_atomically
from .errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .validator import AppendOrigin

log = logging.getLogger(__name__)
_CLIENT = AppendOrigin.CLIENT  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER

NUM_BATCHES_TO_RETAIN = 5
INT_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


def decrement_sequence(seq: int, n: int) -> int:
    return seq - n if seq - n >= 0 else INT_MAX - n + seq + 1


def last_sequence(base_seq: int, last_offset_delta: int) -> int:
    """A batch's last sequence (RecordBatch.last_sequence from header fields)."""
    if base_seq == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_seq + last_offset_delta) & INT_MAX


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


class BatchMetadata(NamedTuple):
    """A retained batch of a producer (Kafka's BatchMetadata); a NamedTuple, built with one
    C call (a frozen dataclass's __init__ makes four ``object.__setattr__`` calls, one batch
    of every idempotent Produce)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, delta: int, ts: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, delta, ts))
        while len(self.batch_metadata) > NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.last_timestamp = ts

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def find_duplicate_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        # one unpack of the header: this runs for every idempotent append
        _, _, _, _, _, _, lod, _, _, _, epoch, first, _ = batch.header()
        if epoch != self.producer_epoch:
            return None
        last = last_sequence(first, lod)
        for m in self.batch_metadata:
            if m.last_seq == last and m.first_seq == first:
                return m
        return None

    def with_batches(self, batch_metadata: deque[BatchMetadata]) -> ProducerStateEntry:
        """This entry with ``batch_metadata`` in place of its own."""
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, batch_metadata,
            self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset,
        )


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


class ProducerAppendInfo:
    """Validates and accumulates one append's batches for one producer (not yet applied)."""

    __slots__ = ("current", "origin", "producer_id", "started_txns", "tp", "updated")

    def __init__(self, tp: str, producer_id: int, current: ProducerStateEntry,
                 origin: AppendOrigin) -> None:
        self.tp = tp
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.with_batches(deque())  # only this append's batches
        self.started_txns: list[TxnMetadata] = []

    def append(self, batch: RecordBatch) -> CompletedTxn | None:
        base_offset, _, _, _, _, attrs, lod, _, max_ts, _, epoch, base_seq, _ = batch.header()
        if attrs & CONTROL_MASK:
            ctype = batch.control_type()
            if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                coord_epoch = _marker_coordinator_epoch(batch)
                return self.append_end_txn_marker(
                    batch.producer_epoch, batch.base_offset, coord_epoch,
                    ctype is ControlRecordType.ABORT, batch.max_timestamp,
                )
            return None  # an empty control batch or an unknown type: nothing to track
        self.append_data_batch(
            epoch, base_seq, last_sequence(base_seq, lod), max_ts, base_offset,
            base_offset + lod, bool(attrs & TRANSACTIONAL_MASK),
        )
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, ts: int,
                          first_offset: int, last_offset: int, transactional: bool) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is _CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, ts)
        txn_first = self.updated.current_txn_first_offset
        if transactional and txn_first is None:
            self.updated.current_txn_first_offset = first_offset
            self.started_txns.append(TxnMetadata(self.producer_id, first_offset))
        elif not transactional and txn_first is not None:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.tp}"
            )

    def append_end_txn_marker(self, epoch: int, offset: int, coordinator_epoch: int,
                              aborted: bool, ts: int) -> CompletedTxn:
        self._check_producer_epoch(epoch, offset)
        if self.updated.coordinator_epoch > coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset} "
                f"in partition {self.tp}: {coordinator_epoch} (zombie), "
                f"{self.updated.coordinator_epoch} (current)"
            )
        self.updated.maybe_update_producer_epoch(epoch)
        first = self.updated.current_txn_first_offset
        completed = CompletedTxn(self.producer_id, offset if first is None else first, offset,
                                 aborted)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.last_timestamp = ts
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            msg = (f"Epoch of producer {self.producer_id} at offset {offset} in {self.tp} is "
                   f"{epoch}, which is smaller than the last seen epoch "
                   f"{self.updated.producer_epoch}")
            if self.origin is AppendOrigin.REPLICATION:
                log.warning(msg)  # replication only warns (Kafka)
            else:
                raise InvalidProducerEpochError(msg)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        upd = self.updated
        if epoch != upd.producer_epoch:
            if first_seq != 0 and upd.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in partition {self.tp}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {upd.producer_epoch} (current producer epoch)"
                )
            return
        if not upd.is_empty:
            last = upd.last_seq
        elif self.current.producer_epoch == epoch:
            last = self.current.last_seq
        else:
            last = NO_SEQUENCE
        # No current epoch (state removed by retention/expiry): any sequence is accepted.
        if self.current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last, first_seq):
            expected = 0 if last == NO_SEQUENCE else (last + 1) & INT_MAX
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in partition {self.tp}: {first_seq} (incoming seq. number), "
                f"{last} (current end sequence number), expected {expected}"
            )

    def to_entry(self) -> ProducerStateEntry:
        """The merged entry to install: earlier batches kept up to 5 when the epoch matches."""
        upd = self.updated
        if upd.producer_epoch == self.current.producer_epoch:
            merged = deque(self.current.batch_metadata, NUM_BATCHES_TO_RETAIN)
            merged.extend(upd.batch_metadata)  # (the oldest fall out past the bound)
        else:
            merged = deque(upd.batch_metadata, NUM_BATCHES_TO_RETAIN)
        return ProducerStateEntry(upd.producer_id, upd.producer_epoch, merged,
                                  upd.coordinator_epoch, upd.last_timestamp,
                                  upd.current_txn_first_offset)


def _marker_coordinator_epoch(batch: RecordBatch) -> int:
    for rec in batch.iter_records():
        if rec.value is not None and len(rec.value) >= 6:
            return int(struct.unpack_from(">hi", rec.value)[1])
    return -1


# -- snapshot files ----------------------------------------------------------------------------
def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry]) -> None:
    """Kafka's format: version, CRC-32C of [6, EOF), count, 46-byte entries; fsynced."""
    body = bytearray()
    n = 0
    for e in entries:
        body += _SNAP_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
            e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        n += 1
    tail = struct.pack(">i", n) + bytes(body)
    data = struct.pack(">hI", SNAPSHOT_VERSION, crc32c(tail)) + tail
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Parse a snapshot; CorruptSnapshotError names the file and what is wrong."""
    return parse_snapshot(path.read_bytes(), path)


def parse_snapshot(data: bytes, path: Path | str) -> list[ProducerStateEntry]:
    """Parse a snapshot's bytes (``path`` names where they came from in errors)."""
    if len(data) < _SNAP_HEADER.size:
        raise CorruptSnapshotError(f"{path}: {len(data)} bytes, shorter than the 10-byte header")
    version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{path}: snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[6:])
    if crc != computed:
        raise CorruptSnapshotError(
            f"{path}: snapshot is corrupt (CRC is no match: stored 0x{crc:08x}, computed "
            f"0x{computed:08x})"
        )
    if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(
            f"{path}: {count} entries declared but {len(data) - 10} entry bytes at byte 10"
        )
    out = []
    for i in range(count):
        (pid, epoch, last_seq, last_off, delta, ts, coord, txn_first) = _SNAP_ENTRY.unpack_from(
            data, _SNAP_HEADER.size + i * _SNAP_ENTRY.size)
        e = ProducerStateEntry(pid, epoch, deque(), coord, ts, None if txn_first < 0 else txn_first)
        if last_off >= 0:
            e.batch_metadata.append(BatchMetadata(last_seq, last_off, delta, ts))
        out.append(e)
    return out


# -- the manager -------------------------------------------------------------------------------
class ProducerStateManager:
    """Producer entries, ongoing transactions and snapshot files of one partition directory."""

    # (slotted: the native plain append, log_plain.py, reads them at their offsets)
    __slots__ = ("__weakref__", "dir", "last_map_offset", "last_snap_offset", "ongoing_txns",
                 "producer_id_expiration_ms", "producers", "snapshots", "tp",
                 "unreplicated_txns")

    def __init__(self, directory: Path, *, producer_id_expiration_ms: int = 86_400_000,
                 topic_partition: str = "") -> None:
        self.dir = Path(directory)
        self.tp = topic_partition or self.dir.name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: SortedDict = SortedDict()  # first offset -> TxnMetadata
        self.unreplicated_txns: SortedDict = SortedDict()  # completed, marker >= HW
        self.last_map_offset = 0
        self.last_snap_offset = 0
        self.snapshots: SortedDict = self._scan_snapshots()  # offset -> Path

    # -- queries -------------------------------------------------------------------------------
    @property
    def map_end_offset(self) -> int:
        return self.last_map_offset

    @property
    def is_empty(self) -> bool:
        return not self.producers and not self.unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self.producers)

    def first_unstable_offset(self) -> int | None:
        """Earliest first offset of a transaction undecided or decided at/above the HW."""
        cands = []
        if self.unreplicated_txns:
            cands.append(self.unreplicated_txns.peekitem(0)[1].first_offset)
        if self.ongoing_txns:
            cands.append(self.ongoing_txns.peekitem(0)[0])
        return min(cands) if cands else None

    def first_undecided_offset(self) -> int | None:
        return self.ongoing_txns.peekitem(0)[0] if self.ongoing_txns else None

    # -- updates -------------------------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.tp, producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        if info.producer_id < 0:
            raise ValueError(f"invalid producer id {info.producer_id} in {self.tp}")
        self.producers[info.producer_id] = info.to_entry()
        for txn in info.started_txns:
            self.ongoing_txns[txn.first_offset] = txn

    def update_from_recovered_batch(self, batch: RecordBatch) -> CompletedTxn | None:
        """Replay one batch read back from the log (recovery: no sequence checks)."""
        info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
        completed = info.append(batch)
        self.update(info)
        return completed

    def restore_earlier_batches(self, producer_id: int, epoch: int,
                                earlier: list[BatchMetadata]) -> None:
        """Batches the producer wrote before its oldest known one (read back from the log),
        kept in front of it up to five in all, when the epoch is still the producer's."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.producer_epoch != epoch or not entry.batch_metadata:
            return
        oldest = entry.batch_metadata[0].first_offset
        merged = [m for m in earlier if m.last_offset < oldest] + list(entry.batch_metadata)
        entry.batch_metadata = deque(merged[-NUM_BATCHES_TO_RETAIN:])

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LastSO recorded with a completed transaction (behaviour #117)."""
        for first, txn in self.ongoing_txns.items():
            if txn.producer_id != completed.producer_id:
                return int(first)
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            return  # a marker without data in this partition
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, hw: int) -> None:
        while self.unreplicated_txns:
            first, txn = self.unreplicated_txns.peekitem(0)
            if txn.last_offset is None or txn.last_offset >= hw:
                break
            del self.unreplicated_txns[first]

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        expired = [pid for pid, e in self.producers.items() if self._is_expired(now_ms, e)]
        for pid in expired:
            del self.producers[pid]
        return expired

    def _is_expired(self, now_ms: int, e: ProducerStateEntry) -> bool:
        return (e.current_txn_first_offset is None
                and now_ms - e.last_timestamp >= self.producer_id_expiration_ms)

    # -- snapshots -----------------------------------------------------------------------------
    def rescan_snapshots(self) -> None:
        """Find the snapshot files again (the log's dir was renamed)."""
        self.snapshots = self._scan_snapshots()

    def _scan_snapshots(self) -> SortedDict:
        out = SortedDict()
        if self.dir.is_dir():
            for p in self.dir.iterdir():
                if p.name.endswith(SNAPSHOT_SUFFIX) and p.name[:-len(SNAPSHOT_SUFFIX)].isdigit():
                    out[offset_from_file_name(p.name)] = p
        return out

    def take_snapshot(self) -> Path | None:
        """Write ``<map end>.snapshot`` unless one at that offset already exists (#112)."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = self.dir / snapshot_file_name(self.last_map_offset)
        write_snapshot(path, self.producers.values())
        self.snapshots[self.last_map_offset] = path
        self.last_snap_offset = self.last_map_offset
        return path

    def latest_snapshot_offset(self) -> int | None:
        return int(self.snapshots.peekitem(-1)[0]) if self.snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return int(self.snapshots.peekitem(0)[0]) if self.snapshots else None

    def snapshot_offsets(self) -> list[int]:
        return [int(o) for o in self.snapshots]

    def snapshot_file_for(self, offset: int) -> Path | None:
        path: Path | None = self.snapshots.get(offset)
        return path

    def remove_and_delete_snapshot(self, offset: int) -> None:
        path = self.snapshots.pop(offset, None)
        if path is not None:
            Path(path).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        for o in [o for o in self.snapshots if o < offset]:
            self.remove_and_delete_snapshot(o)

    def delete_snapshot_at(self, offset: int) -> None:
        self.remove_and_delete_snapshot(offset)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots not at a segment base, except a largest one above every base."""
        bases = set(segment_base_offsets)
        self.snapshots = self._scan_snapshots()
        stray: int | None = None
        for off in list(self.snapshots):
            if off in bases:
                continue
            if stray is not None:
                self.remove_and_delete_snapshot(stray)
            stray = off
        if stray is not None and bases and stray < max(bases):
            self.remove_and_delete_snapshot(stray)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int) -> None:
        """Drop snapshots outside (start, end]; reload from the latest if end moved (#113)."""
        for off in list(self.snapshots):
            if off > log_end_offset or off <= log_start_offset:
                self.remove_and_delete_snapshot(off)
        if log_end_offset != self.map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def reload_from_snapshot(self, snapshot: bytes, offset: int, log_start_offset: int,
                             now_ms: int) -> None:
        """Start over from a snapshot given as bytes (a tiered follower's, from remote
        storage: Kafka's buildProducerSnapshotFile + truncateFullyAndReloadSnapshots)."""
        write_atomically(self.dir / snapshot_file_name(offset), snapshot)
        self.snapshots = self._scan_snapshots()
        self._clear()
        self._load_from_snapshot(log_start_offset, now_ms)

    def _clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self.snapshots:
            off, path = self.snapshots.peekitem(-1)
            try:
                entries = read_snapshot(Path(path))
            except (CorruptSnapshotError, OSError) as e:
                log.warning("deleting unreadable producer snapshot: %s", e)
                self.remove_and_delete_snapshot(off)
                continue
            self.last_snap_offset = self.last_map_offset = int(off)
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_entry(entry)
            return
        self.last_snap_offset = self.last_map_offset = log_start_offset

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        first = entry.current_txn_first_offset
        if first is not None:
            self.ongoing_txns[first] = TxnMetadata(entry.producer_id, first)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Drop transactions fully below the new start; clamp the map end (Kafka)."""
        for first in [f for f, t in self.unreplicated_txns.items()
                      if t.last_offset is not None and t.last_offset < log_start_offset]:
            del self.unreplicated_txns[first]
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        self.last_snap_offset = self.latest_snapshot_offset() or log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything: state, snapshots, map end = ``offset`` (#85)."""
        self._clear()
        for off in list(self.snapshots):
            self.remove_and_delete_snapshot(off)
        self.last_snap_offset = self.last_map_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Delete snapshots above ``offset`` (state is rebuilt by the caller)."""
        for off in [o for o in self.snapshots if o > offset]:
            self.remove_and_delete_snapshot(off)
