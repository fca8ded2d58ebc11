"""What the RemoteLogManager copies and where it starts (Kafka's RLMCopyTask helpers:
candidateLogSegments, getLeaderEpochEntries, findHighestRemoteOffset, findLogStartOffset,
isRemoteSegmentWithinLeaderEpochs), as functions over a Log and a partition's
RemoteLogMetadataCache.

Everything here reads the log on the event loop (segment lists, the leader-epoch cache);
the blocking copy of the files runs elsewhere (``RemoteLogManager``'s thread pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from tidelog.storage.leader_epoch import EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.storage.remote.storage_manager import LogSegmentData
from tidelog.storage.segment import LogSegment

NO_PARTITION_LEADER_EPOCH = -1


@dataclass(frozen=True)
class EnrichedLogSegment:
    """Kafka's EnrichedLogSegment: a closed segment and the base offset of the next one."""

    segment: LogSegment
    next_segment_offset: int

    @property
    def end_offset(self) -> int:
        return self.next_segment_offset - 1


@dataclass(frozen=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


def candidate_log_segments(lg: Log, from_offset: int,
                           last_stable_offset: int) -> list[EnrichedLogSegment]:
    """Kafka's candidateLogSegments: every segment from the one holding ``from_offset``
    whose next segment starts at or below the last stable offset (never the active one)."""
    segs = list(lg.segments.values())
    start = 0
    for i, seg in enumerate(segs):
        if seg.base_offset <= from_offset:
            start = i
    out: list[EnrichedLogSegment] = []
    for prev, cur in zip(segs[start:], segs[start + 1:], strict=False):
        if cur.base_offset <= last_stable_offset:
            out.append(EnrichedLogSegment(prev, cur.base_offset))
    return out


def epoch_entries_in_range(entries: list[EpochEntry], start_offset: int,
                           end_offset: int) -> list[EpochEntry]:
    """Kafka's LeaderEpochFileCache.epochEntriesInRange: the entries truncated from the
    start at ``start_offset`` (when >= 0, the last earlier one moved up to it) and from the
    end at ``end_offset`` (entries starting there or later dropped)."""
    out = list(entries)
    if start_offset >= 0:
        removed = [e for e in out if e.start_offset <= start_offset]
        if removed:
            kept = [e for e in out if e.start_offset > start_offset]
            out = [EpochEntry(removed[-1].epoch, start_offset), *kept]
    return [e for e in out if e.start_offset < end_offset]


def epoch_checkpoint_bytes(entries: list[EpochEntry]) -> bytes:
    """The leader-epoch-checkpoint file format (version 0, count, ``epoch offset`` lines)."""
    lines = ["0", str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
    return ("\n".join(lines) + "\n").encode()


class MissingProducerSnapshotError(FileNotFoundError):
    """The producer snapshot at a segment's end is gone: the segment cannot be tiered."""


def log_segment_data(lg: Log, candidate: EnrichedLogSegment) -> LogSegmentData:
    """Kafka's LogSegmentData of one closed segment: its files, the producer snapshot at the
    next segment's base, and the leader-epoch checkpoint up to the segment's end."""
    seg = candidate.segment
    snapshot = lg.producer_state.snapshot_file_for(candidate.next_segment_offset)
    if snapshot is None or not snapshot.exists():
        raise MissingProducerSnapshotError(
            f"no producer snapshot at {candidate.next_segment_offset} in {lg.dir}")
    txn = seg.txn_index.file
    epochs = epoch_entries_in_range(lg.leader_epoch_cache.entries, -1,
                                    candidate.next_segment_offset)
    return LogSegmentData(
        log_segment=seg.log.path, offset_index=seg.offset_index.file,
        time_index=seg.time_index.file, transaction_index=txn if txn.exists() else None,
        producer_snapshot_index=snapshot, leader_epoch_index=epoch_checkpoint_bytes(epochs))


def segment_leader_epochs(lg: Log, candidate: EnrichedLogSegment) -> dict[int, int]:
    """Each leader epoch of the segment's records and the epoch's first offset in it."""
    entries = epoch_entries_in_range(lg.leader_epoch_cache.entries,
                                     candidate.segment.base_offset,
                                     candidate.next_segment_offset)
    if not entries:  # a log written before leader epochs: Kafka's epoch 0
        return {0: candidate.segment.base_offset}
    return {e.epoch: e.start_offset for e in entries}


def find_highest_remote_offset(cache: RemoteLogMetadataCache, lg: Log) -> OffsetAndEpoch:
    """Kafka's findHighestRemoteOffset: from the latest epoch of the log's lineage back, the
    highest copied offset of the first epoch that has one (capped by that epoch's end in
    this log), or -1."""
    entries = lg.leader_epoch_cache.entries
    for entry in reversed(entries):
        highest = cache.highest_offset_for_epoch(entry.epoch)
        if highest is None:
            continue
        epoch, end = lg.leader_epoch_cache.end_offset_for(entry.epoch, lg.log_end_offset)
        if end <= highest:
            return OffsetAndEpoch(end - 1, epoch)
        return OffsetAndEpoch(highest, entry.epoch)
    if not entries:  # no epochs: segments were copied at epoch 0
        highest = cache.highest_offset_for_epoch(0)
        if highest is not None:
            return OffsetAndEpoch(highest, 0)
    return OffsetAndEpoch(-1, NO_PARTITION_LEADER_EPOCH)


def find_log_start_offset(cache: RemoteLogMetadataCache, lg: Log) -> int:
    """Kafka's findLogStartOffset: the start of the first remote segment of the earliest
    epoch of the log's lineage that has one, else the local log start."""
    epochs = [e.epoch for e in lg.leader_epoch_cache.entries] or [0]
    for epoch in epochs:
        first = next(iter(cache.list_remote_log_segments(epoch)), None)
        if first is not None:
            return first.start_offset
    return lg.local_log_start_offset


def local_size_and_segments(lg: Log) -> tuple[int, int]:
    """Bytes and count of the closed local segments not yet copied (the copy lag)."""
    copied = lg.highest_offset_in_remote_storage
    segs = lg.segments.values()
    size = n = 0
    for seg, nxt in pairwise(segs):
        if nxt.base_offset - 1 > copied:
            size += seg.size
            n += 1
    return size, n


def build_filtered_leader_epoch_map(epochs: dict[int, int]) -> dict[int, int]:
    """Kafka's buildFilteredLeaderEpochMap: epoch -> start offset without the epochs that
    hold no records (an epoch starting where the next one starts)."""
    items = sorted(epochs.items())
    return {e: o for (e, o), nxt in zip(items, [*items[1:], None], strict=True)
            if nxt is None or nxt[1] != o}


def lineage(lg: Log) -> dict[int, int]:
    """The log's leader-epoch lineage (epoch -> start offset, epochs with records only); a
    log written before leader epochs is epoch 0 from its start (its segments' epoch)."""
    entries = lg.leader_epoch_cache.entries
    if not entries:
        return {0: lg.log_start_offset}
    return build_filtered_leader_epoch_map({e.epoch: e.start_offset for e in entries})


def is_remote_segment_within_leader_epochs(metadata: RemoteLogSegmentMetadata,
                                           log_end_offset: int,
                                           leader_epochs: dict[int, int]) -> bool:
    """Kafka's isRemoteSegmentWithinLeaderEpochs: the segment's epochs (from the first one
    at or after the lineage's first epoch) are the lineage's own, each starting where the
    lineage says, its last one ending before the lineage's next epoch, and the segment
    ending below the log end offset."""
    if not leader_epochs:
        return False
    seg = build_filtered_leader_epoch_map(dict(metadata.segment_leader_epochs))
    epochs = sorted(leader_epochs)
    seg_epochs = sorted(seg)
    last = seg_epochs[-1]
    if last < epochs[0] or last > epochs[-1]:
        return False
    first = next((e for e in seg_epochs if e >= epochs[0]), None)
    if first is None:
        return False
    for epoch in seg_epochs:
        if epoch < first:
            continue
        if epoch not in leader_epochs:
            return False
        lower = [e for e in epochs if e < epoch]
        if epoch == first and lower and seg[epoch] < leader_epochs[epoch]:
            return False
        nxt = next((e for e in epochs if e > epoch), None)
        if epoch == last:
            if nxt is not None and metadata.end_offset > leader_epochs[nxt] - 1:
                return False
        else:
            seg_nxt = next(e for e in seg_epochs if e > epoch)
            if nxt != seg_nxt or leader_epochs[nxt] != seg[seg_nxt]:
                return False
    return metadata.end_offset < log_end_offset
