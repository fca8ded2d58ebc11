"""Transactional offset commits (Kafka's GroupCoordinator.handleTxnCommitOffsets and
completeTransaction).

TxnOffsetCommit appends the offsets to the group's ``__consumer_offsets`` partition as a
*transactional* batch of the producer; they wait in the manager's ``PendingTxnOffsets``
(pending_offsets.py, which also holds the load-time rules) until the transaction
coordinator's marker lands on that partition: COMMIT makes them the group's committed
offsets, ABORT drops them."""

from __future__ import annotations

from collections.abc import Mapping

from tidelog.protocol.errors import ErrorCode
from tidelog.records import CompressionType, RecordBatchBuilder
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.member import UNKNOWN_MEMBER_ID
from tidelog.server.coordinator.group.metadata_manager import GroupMetadataManager
from tidelog.server.coordinator.group.offsets import CommitEntry, validate_member_epoch
from tidelog.server.coordinator.group.records import (
    OffsetAndMetadata,
    encode_offset_key,
    encode_offset_value,
)
from tidelog.util.topic_partition import TopicPartition


def commit_txn_offsets(
    coord: GroupCoordinator,
    group_id: str,
    offsets: Mapping[TopicPartition, CommitEntry],
    *,
    producer_id: int,
    producer_epoch: int,
    member_id: str = UNKNOWN_MEMBER_ID,
    generation_id: int = -1,
) -> dict[TopicPartition, ErrorCode]:
    err = coord.group_error(group_id)
    err = _validate(coord, group_id, member_id, generation_id) if err == ErrorCode.NONE else err
    if err != ErrorCode.NONE:
        return dict.fromkeys(offsets, err)
    now = coord.now()
    limit = coord.config.offset_metadata_max_bytes
    result: dict[TopicPartition, ErrorCode] = {}
    accepted: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, e in offsets.items():
        md = e.metadata or ""
        if len(md.encode()) > limit:
            result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            accepted[tp] = OffsetAndMetadata(e.offset, md, now, e.leader_epoch)
    if accepted:
        stored = _append(coord, group_id, accepted, producer_id, producer_epoch)
        if stored == ErrorCode.NONE:
            coord.manager.pending_txn.add(producer_id, group_id, accepted)
        result.update(dict.fromkeys(accepted, stored))
    return result


def _validate(coord: GroupCoordinator, group_id: str, member_id: str,
              generation_id: int) -> ErrorCode:
    consumer_group = coord.consumer.groups.get(group_id)
    if consumer_group is not None:  # a KIP-848 group: the member's epoch is the generation
        if member_id == UNKNOWN_MEMBER_ID and generation_id < 0:
            return ErrorCode.NONE
        return validate_member_epoch(consumer_group, member_id, generation_id)
    group = coord.groups.get(group_id)
    if group is None:
        group = GroupMetadata(group_id, coord.now())
        coord.groups[group_id] = group
    if group.is_state(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if member_id != UNKNOWN_MEMBER_ID and member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id >= 0 and generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def _append(coord: GroupCoordinator, group_id: str,
            offsets: Mapping[TopicPartition, OffsetAndMetadata], producer_id: int,
            producer_epoch: int) -> ErrorCode:
    manager = coord.manager
    builder = RecordBatchBuilder(
        CompressionType(manager.config.offsets_topic_compression_codec),
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
        is_transactional=True)
    now = coord.now()
    for tp, o in offsets.items():
        builder.append(now, encode_offset_key(group_id, tp.topic, tp.partition),
                       encode_offset_value(o))
    try:
        manager.store.append(manager.partition_for(group_id), builder.build())
    except OSError:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    except Exception as exc:  # the partition's producer state refused the epoch
        name = getattr(exc, "kafka_error", "UNKNOWN_SERVER_ERROR")
        return ErrorCode[name] if name in ErrorCode.__members__ else ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.NONE


def complete_txn_offsets(broker: object, partition: int, producer_id: int, commit: bool) -> None:
    """The COMMIT/ABORT marker of ``producer_id`` reached ``__consumer_offsets-partition``."""
    coord: GroupCoordinator | None = getattr(broker, "group_coordinator", None)
    if coord is None:
        return
    manager = coord.manager
    decided = manager.pending_txn.complete(
        producer_id, commit, partition, partition in manager.partitions.loading, manager.partition_for)
    for group_id, offsets in decided.items():
        consumer_group = coord.consumer.groups.get(group_id)
        if consumer_group is not None:
            consumer_group.offsets.update(offsets)
            continue
        group = coord.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, coord.now())
            coord.groups[group_id] = group
        group.offsets.update(offsets)


def has_pending(manager: GroupMetadataManager, group_id: str, tp: TopicPartition) -> bool:
    """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for these."""
    return manager.pending_txn.has_pending(group_id, tp)
