"""read_committed for the read-only partition reader (reader.py): the last stable offset of a
directory and the batches of aborted transactions, derived as Kafka derives them.

A directory has no stored LSO: Kafka's is ``min(first offset of the earliest open
transaction, high watermark)``, kept in memory by the broker's ProducerStateManager. Here
the producer state is rebuilt the same way the broker rebuilds it at start-up: the newest
readable ``<offset>.snapshot`` (each producer's ongoing transaction's first offset as of that
offset), then every complete batch from there to the end — a transactional data batch opens
its producer's transaction, a COMMIT/ABORT marker closes it. The high watermark is the end
of the complete batches we can see, so a reader of a live directory may lag the broker a
little but never sees data of a transaction that has no marker yet.

Aborted transactions come from each segment's ``.txnindex`` (Kafka's 34-byte entries) and,
for the part the scan covered, from the markers themselves: a live broker appends the ABORT
marker to the log before the ``.txnindex`` entry, and a reader must not return the data of a
transaction whose index entry it raced. Batches are then filtered exactly as Kafka's consumer
filters a read_committed fetch (Fetcher's abortedProducerIds / abortedTransactions heap).
"""

from __future__ import annotations

import heapq
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.records import RecordBatch
from tidelog.records.batch import ControlRecordType

from .errors import CorruptSnapshotError
from .index.txn_index import ENTRY_SIZE, AbortedTxn
from .producer_state import SNAPSHOT_SUFFIX, read_snapshot

TXN_INDEX_SUFFIX = ".txnindex"
_TXN_ENTRY = struct.Struct(">hqqqq")


@dataclass
class TxnState:
    """What a scan of a partition found: its visible end, its LSO and aborted transactions."""

    log_end_offset: int
    last_stable_offset: int
    scanned_from: int  # markers at or above this offset were seen by the scan
    aborted: list[AbortedTxn] = field(default_factory=list)


def newest_snapshot(directory: Path, below_or_at: int) -> tuple[int, dict[int, int]] | None:
    """(offset, {producer id: ongoing transaction's first offset}) of the newest readable
    snapshot at or below ``below_or_at``; a snapshot being written (bad CRC) or one that
    vanished is skipped for the next older one, as Kafka's loader skips a corrupt one."""
    offsets = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit() and int(stem) <= below_or_at:
            offsets.append(int(stem))
    for offset in sorted(offsets, reverse=True):
        try:
            entries = read_snapshot(directory / f"{offset:020d}{SNAPSHOT_SUFFIX}")
        except (OSError, CorruptSnapshotError):
            continue
        ongoing = {e.producer_id: e.current_txn_first_offset for e in entries
                   if e.current_txn_first_offset is not None}
        return offset, ongoing
    return None


def scan_transactions(
    batches: Iterable[RecordBatch], start: int, ongoing: dict[int, int], log_end: int
) -> TxnState:
    """Replay producer state over ``batches`` (every complete batch from ``start`` on), with
    ``ongoing`` the open transactions at ``start``. Only batch headers are parsed, plus the
    one control record of a transactional control batch: no record is decoded."""
    ongoing = dict(ongoing)
    aborted: list[AbortedTxn] = []
    end = log_end
    for batch in batches:
        end = batch.next_offset
        if batch.producer_id < 0 or not batch.is_transactional:
            continue
        pid = batch.producer_id
        if not batch.is_control:
            ongoing.setdefault(pid, batch.base_offset)
            continue
        kind = batch.control_type()
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            continue
        # Kafka's appendEndTxnMarker: a marker with no data before it still completes a txn
        first = ongoing.pop(pid, batch.base_offset)
        if kind == ControlRecordType.ABORT:
            aborted.append(AbortedTxn(pid, first, batch.base_offset, -1))
    lso = min([end, *ongoing.values()])
    return TxnState(end, lso, start, aborted)


def read_txn_index(path: Path) -> list[AbortedTxn]:
    """The entries of one ``.txnindex``; a missing file is an empty index, and a trailing
    partial entry (being appended) is ignored."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return parse_txn_index(data)


def parse_txn_index(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex``'s bytes (a trailing partial entry is ignored)."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
        if version != 0:
            break  # not an entry Kafka wrote: stop trusting the rest, the scan still covers its part
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def merge_aborted(indexed: Iterable[AbortedTxn], scanned: Iterable[AbortedTxn]) -> list[AbortedTxn]:
    """Both lists, one entry per (producer id, marker offset), the index's first offset kept."""
    out = {(t.producer_id, t.last_offset): t for t in scanned}
    out.update({(t.producer_id, t.last_offset): t for t in indexed})
    return sorted(out.values(), key=lambda t: (t.first_offset, t.last_offset))


def filter_aborted(
    batches: Iterable[RecordBatch], aborted: Iterable[AbortedTxn], start: int
) -> Iterator[RecordBatch]:
    """Kafka's consumer-side read_committed filter: the data batches of a producer between an
    aborted transaction's first offset and its ABORT marker are dropped; control batches pass
    (they never become rows). Only transactions whose marker is at or after ``start`` apply,
    as a fetch at ``start`` lists them (a txn whose marker is below it is already closed)."""
    pending = [(t.first_offset, t.producer_id) for t in aborted if t.last_offset >= start]
    heapq.heapify(pending)
    aborting: set[int] = set()
    for batch in batches:
        pid = batch.producer_id
        if pid < 0:  # the common case: no producer state at all, nothing to look up
            yield batch
            continue
        while pending and pending[0][0] <= batch.last_offset:
            aborting.add(heapq.heappop(pending)[1])
        if batch.is_control:
            if pid in aborting and batch.control_type() == ControlRecordType.ABORT:
                aborting.discard(pid)
            yield batch
        elif not (batch.is_transactional and pid in aborting):
            yield batch
