"""A follower of a tiered partition that is behind its leader's local log start (Kafka's
ReplicaFetcherTierStateMachine.buildRemoteLogAuxState): instead of the segments the leader
no longer has locally, it takes from remote storage the leader-epoch checkpoint and the
producer snapshot of the remote segment just below the leader's local start, starts its log
empty after that segment, and fetches the rest from the leader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from tidelog.storage.leader_epoch import EpochEntry
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from tidelog.storage.remote.storage_manager import IndexType, RemoteStorageError
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from .remote_log_manager import RemoteLogManager
    from .replica_manager import ReplicaManager


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
                                     leader_log_start_offset: int, target_epoch: int = -1,
                                     leader_local_log_start_offset: int | None = None) -> int:
    """Rebuild ``lg`` to follow from remote storage; returns the offset to fetch from next.
    ``target_epoch`` is the leader epoch of ``leader_local_log_start_offset - 1`` (Kafka
    asks the leader, fetchEarlierEpochEndOffset). Without the leader's local start, the
    last finished remote segment is taken: the leader deletes only copied segments, so its
    local start is at most that segment's end + 1."""
    cache = await rlm.rlmm.sync(tip)
    finished = sorted(cache.list_remote_log_segments(), key=lambda m: m.end_offset)
    metadata: RemoteLogSegmentMetadata | None
    if leader_local_log_start_offset is None:
        metadata = finished[-1] if finished else None
    else:
        before = leader_local_log_start_offset - 1
        metadata = cache.remote_log_segment_metadata(target_epoch, before) or next(
            (m for m in finished if m.start_offset <= before <= m.end_offset), None)
    if metadata is None:
        raise RemoteStorageError(f"no remote segment of {tip} below the leader's local start "
                                 "yet: its state cannot be built from remote storage")
    epochs = await rlm.blocking(rlm.rsm.fetch_index, metadata, IndexType.LEADER_EPOCH)
    snapshot = await rlm.blocking(rlm.rsm.fetch_index, metadata, IndexType.PRODUCER_SNAPSHOT)
    next_offset = metadata.end_offset + 1
    lg.restore_remote_state(next_offset, leader_log_start_offset,
                            parse_epoch_checkpoint(epochs), snapshot)
    lg.highest_offset_in_remote_storage = max(lg.highest_offset_in_remote_storage,
                                              metadata.end_offset)
    return next_offset


def tier_state_builder(rlm: RemoteLogManager, rm: ReplicaManager
                       ) -> Callable[[TopicPartition, int], Awaitable[int]]:
    """The follower fetchers' ``tier_state``: (partition, leader's log start) -> the offset
    to fetch from, the partition's log rebuilt from remote storage."""
    async def build(tp: TopicPartition, leader_log_start: int) -> int:
        partition = rm.partitions.get(tp)
        if partition is None or partition.topic_id is None:
            raise RemoteStorageError(f"{tp} is not hosted here")
        tip = TopicIdPartition(partition.topic_id, tp.topic, tp.partition)
        return await build_remote_log_aux_state(
            rlm, tip, partition.log, leader_log_start_offset=max(0, leader_log_start))

    return build
