"""A follower of a tiered partition that is behind its leader's local log start (Kafka's
ReplicaFetcherTierStateMachine.buildRemoteLogAuxState): instead of the segments the leader
no longer has locally, it takes from remote storage the leader-epoch checkpoint and the
producer snapshot of the remote segment just below the leader's local start, starts its log
empty after that segment, and fetches the rest from the leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.storage.leader_epoch import EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.log_truncation import restore_remote_state
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from tidelog.storage.remote.storage_manager import IndexType, RemoteStorageError

if TYPE_CHECKING:
    from .remote_log_manager import RemoteLogManager


def parse_epoch_checkpoint(data: bytes) -> list[EpochEntry]:
    """Entries of a leader-epoch-checkpoint file (version 0, count, ``epoch offset`` lines)."""
    lines = data.decode().split("\n")
    if len(lines) < 2 or lines[0].strip() != "0":
        raise RemoteStorageError(f"not a leader epoch checkpoint: {data[:40]!r}")
    count = int(lines[1])
    out = []
    for line in lines[2:2 + count]:
        epoch, offset = line.split()
        out.append(EpochEntry(int(epoch), int(offset)))
    return out


async def build_remote_log_aux_state(rlm: RemoteLogManager, tip: TopicIdPartition, lg: Log, *,
                                     target_epoch: int, leader_local_log_start_offset: int,
                                     leader_log_start_offset: int) -> int:
    """Rebuild ``lg`` to follow from remote storage; returns the offset to fetch from next.
    ``target_epoch`` is the leader epoch of ``leader_local_log_start_offset - 1`` (the
    caller asks the leader, as Kafka's fetchEarlierEpochEndOffset)."""
    cache = await rlm.rlmm.sync(tip)
    before = leader_local_log_start_offset - 1
    metadata: RemoteLogSegmentMetadata | None = cache.remote_log_segment_metadata(
        target_epoch, before)
    if metadata is None:
        metadata = next((m for m in cache.list_remote_log_segments()
                         if m.start_offset <= before <= m.end_offset), None)
    if metadata is None:
        raise RemoteStorageError(f"no remote segment of {tip} holds offset {before} (epoch "
                                 f"{target_epoch}): its state cannot be built from remote "
                                 "storage yet")
    epochs = await rlm.blocking(rlm.rsm.fetch_index, metadata, IndexType.LEADER_EPOCH)
    snapshot = await rlm.blocking(rlm.rsm.fetch_index, metadata, IndexType.PRODUCER_SNAPSHOT)
    next_offset = metadata.end_offset + 1
    restore_remote_state(lg, next_offset, leader_log_start_offset,
                         parse_epoch_checkpoint(epochs), snapshot)
    lg.highest_offset_in_remote_storage = max(lg.highest_offset_in_remote_storage,
                                              metadata.end_offset)
    return next_offset
