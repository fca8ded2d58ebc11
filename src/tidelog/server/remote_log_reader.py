"""Reads of tiered data (Kafka's RemoteLogReader and RemoteLogManager.read): a fetch below
the local log start is answered from remote storage, on ``remote.log.reader.threads``
threads, never on the event loop.

The segments to read are chosen on the loop from the partition's replayed metadata (the
segment holding the offset in the offset's leader epoch, then the lineage's next ones, as
Kafka's findNextSegmentMetadata); the thread then reads the remote offset index for a start
position, fetches one bounded byte range of the segment's ``.log`` and returns whole batches
as bytes, the first one even when it is larger than the limit (``min_one_message``), with the
aborted transactions of a read_committed fetch (Kafka's collectAbortedTransactions): from the
remote ``.txnindex`` of the segment read and of the lineage's later segments, until an entry's
last stable offset reaches the records' end; a search the remote segments do not complete
(an abort marker not tiered yet) goes on in the local segments, on the loop
(``RemoteLogManager.read``).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tidelog.metrics.remote import RemoteLogMetrics
from tidelog.records.batch import iter_batches
from tidelog.storage.index.txn_index import (
    AbortedTxn,
    TxnIndexSearchResult,
    decode_aborted_txns,
    search_aborted_txns,
)
from tidelog.storage.leader_epoch import LeaderEpochFileCache
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.storage.remote.storage_manager import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)

_ENTRY = struct.Struct(">ii")  # offset index: relative offset, position
_LOG_OVERHEAD = 12  # base offset + length: a batch is its length field + 12 bytes
NEXT_SEGMENTS = 2


@dataclass(frozen=True)
class RemoteStorageFetchInfo:
    """Kafka's RemoteStorageFetchInfo: one partition of a Fetch to read remotely."""

    topic_id_partition: TopicIdPartition
    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    read_committed: bool = False


@dataclass
class RemoteFetchResult:
    """The batches read (bytes, empty when none), the aborted transactions among them for a
    read_committed fetch, or the error that stopped the read. ``txn_search_below``: the
    transaction indexes of the segments read did not complete the search for aborted
    transactions below this offset; the later segments' go on with it."""

    records: bytes = b""
    aborted_transactions: list[AbortedTxn] | None = None
    error: Exception | None = None
    segments: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    txn_search_below: int | None = None


def segments_to_read(cache: RemoteLogMetadataCache, epochs: LeaderEpochFileCache,
                     offset: int) -> list[RemoteLogSegmentMetadata]:
    """The remote segment holding ``offset`` in the offset's leader epoch, then the next
    ones of the lineage in case it holds no batch at or past ``offset`` (Kafka's
    fetchRemoteLogSegmentMetadata and findNextSegmentMetadata: a segment uploaded under an
    epoch the lineage does not have is never read). A log without leader epochs reads by
    offset alone."""
    if not epochs.entries:
        ordered = sorted(cache.list_remote_log_segments(), key=lambda m: m.start_offset)
        held = [m for m in ordered if m.end_offset >= offset]
        if not held or held[0].start_offset > offset:
            return []
        return held[:1 + NEXT_SEGMENTS]
    out: list[RemoteLogSegmentMetadata] = []
    while len(out) <= NEXT_SEGMENTS:
        epoch = epochs.epoch_for_offset(offset)
        found = cache.remote_log_segment_metadata(epoch, offset) if epoch is not None else None
        if found is None:
            break
        out.append(found)
        offset = found.end_offset + 1
    return out


def start_position(index: bytes, base_offset: int, offset: int) -> int:
    """The position of the largest offset index entry at or below ``offset`` (0 if none)."""
    position = 0
    for i in range(0, len(index) - len(index) % 8, 8):
        rel, pos = _ENTRY.unpack_from(index, i)
        if i > 0 and rel == 0 and pos == 0:
            break  # the unused tail of an untrimmed index
        if base_offset + rel > offset:
            break
        position = pos
    return position


def _batch_size(data: bytes, at: int) -> int | None:
    if len(data) - at < _LOG_OVERHEAD:
        return None
    return int.from_bytes(data[at + 8:at + 12], "big", signed=True) + _LOG_OVERHEAD


def read_segment(rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata,
                 info: RemoteStorageFetchInfo) -> bytes:
    """Whole batches of one remote segment from the fetch offset, within ``max_bytes``
    (the first one whole in any case with ``min_one_message``). Blocking."""
    try:
        index = rsm.fetch_index(metadata, IndexType.OFFSET)
    except RemoteResourceNotFoundError:
        index = b""
    pos = start_position(index, metadata.start_offset, info.fetch_offset)
    span = max(info.max_bytes, 1) + _LOG_OVERHEAD + 64 * 1024
    data = rsm.fetch_log_segment(metadata, pos, pos + span - 1)
    out = bytearray()
    at = 0
    while (size := _batch_size(data, at)) is not None:
        if at + size > len(data):  # the batch runs past the range fetched
            if out or (not info.min_one_message and size > info.max_bytes):
                break
            data = data[:at] + rsm.fetch_log_segment(metadata, pos + at, pos + at + size - 1)
            continue
        batch = next(iter_batches(data, at, at + size, validate=False))
        if batch.last_offset >= info.fetch_offset:
            if out and len(out) + size > info.max_bytes:
                break
            if not out and size > info.max_bytes and not info.min_one_message:
                break
            out += data[at:at + size]
        at += size
    return bytes(out)


def aborted_transactions(rsm: RemoteStorageManager,
                         segments: Iterable[RemoteLogSegmentMetadata], fetch_offset: int,
                         upper_bound: int) -> TxnIndexSearchResult:
    """Aborted transactions overlapping [fetch_offset, upper_bound) from the segments'
    remote ``.txnindex`` in lineage order, searched until an entry's last stable offset
    reaches ``upper_bound`` (complete). An aborted transaction is indexed in the segment of
    its abort marker, which may be any later one (Kafka's collectAbortedTransactions over
    remote segments, each next one with a transaction index)."""
    out: list[AbortedTxn] = []
    for metadata in segments:
        if metadata.txn_index_empty:
            continue
        try:
            data = rsm.fetch_index(metadata, IndexType.TRANSACTION)
        except RemoteResourceNotFoundError:
            continue
        if search_aborted_txns(decode_aborted_txns(data), fetch_offset, upper_bound, out):
            return TxnIndexSearchResult(out, True)
    return TxnIndexSearchResult(out, False)


def lineage_with_txn_index(cache: RemoteLogMetadataCache, epochs: LeaderEpochFileCache,
                           after: int) -> list[RemoteLogSegmentMetadata]:
    """The segments of the lineage starting after offset ``after`` with a transaction
    index, where a read_committed search the segments read did not complete goes on."""
    return [m for m in cache.with_txn_index_after(after)
            if not epochs.entries or _in_lineage(cache, epochs, m)]


def _in_lineage(cache: RemoteLogMetadataCache, epochs: LeaderEpochFileCache,
                metadata: RemoteLogSegmentMetadata) -> bool:
    epoch = epochs.epoch_for_offset(metadata.start_offset)
    return epoch is not None and \
        cache.remote_log_segment_metadata(epoch, metadata.start_offset) is metadata


def read_remote(rsm: RemoteStorageManager, segments: list[RemoteLogSegmentMetadata],
                info: RemoteStorageFetchInfo) -> RemoteFetchResult:
    """Kafka's RemoteLogManager.read over the segments chosen on the loop. Blocking."""
    for i, metadata in enumerate(segments):
        records = read_segment(rsm, metadata, info)
        if not records:
            continue
        if not info.read_committed:
            return RemoteFetchResult(records, segments=segments)
        upper = max(b.next_offset for b in iter_batches(records, validate=False))
        search = aborted_transactions(rsm, segments[i:], info.fetch_offset, upper)
        return RemoteFetchResult(records, search.aborted_transactions, segments=segments,
                                 txn_search_below=None if search.is_complete else upper)
    return RemoteFetchResult(b"", [] if info.read_committed else None, segments=segments)


class RemoteLogReader:
    """Kafka's RemoteLogReader thread pool: ``remote.log.reader.threads`` readers."""

    def __init__(self, rsm: RemoteStorageManager, threads: int,
                 metrics: RemoteLogMetrics) -> None:
        self.rsm = rsm
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="tidelog-remote-reader")

    async def read(self, info: RemoteStorageFetchInfo,
                   segments: list[RemoteLogSegmentMetadata]) -> RemoteFetchResult:
        """Read off the loop; a failure is the result's ``error``, never raised."""
        topic = info.topic_id_partition.topic
        self.metrics.mark(topic, "remote_fetch_requests")
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self.pool, read_remote, self.rsm, segments,
                                                info)
        except Exception as exc:  # remote storage down, an object missing, bad bytes
            self.metrics.mark(topic, "remote_fetch_errors")
            return RemoteFetchResult(error=exc, segments=segments)
        self.metrics.mark(topic, "remote_fetch_bytes", len(result.records))
        return result

    async def aborted_transactions(self, segments: list[RemoteLogSegmentMetadata],
                                   fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        """:func:`aborted_transactions` off the loop (raises what remote storage raises)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, aborted_transactions, self.rsm, segments,
                                          fetch_offset, upper_bound)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
