"""Transactional offset commits (Kafka's GroupCoordinator.handleTxnCommitOffsets and the
pending-offset half of GroupMetadataManager).

TxnOffsetCommit appends the offsets to the group's ``__consumer_offsets`` partition as a
*transactional* batch of the producer, and keeps them pending: OffsetFetch does not see them.
The transaction coordinator's COMMIT marker on that partition makes them the group's
committed offsets; an ABORT marker drops them. Loading replays the same rules: transactional
records count only once their COMMIT marker is read; those still undecided at the end of the
log become pending again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tidelog.protocol.errors import ErrorCode
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.server.group.group import GroupMetadata, GroupState
from tidelog.server.group.offsets import CommitEntry
from tidelog.server.group.rebalance import UNKNOWN_MEMBER_ID
from tidelog.server.group.records import (
    OffsetAndMetadata,
    OffsetKey,
    SchemaError,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.group.coordinator import GroupCoordinator
    from tidelog.server.group.metadata_manager import GroupMetadataManager, LoadedPartition

# producer id -> group id -> partition -> offset (on the GroupMetadataManager)
Pending = dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]


def pending_of(manager: GroupMetadataManager) -> Pending:
    pending: Pending | None = getattr(manager, "pending_txn_offsets", None)
    if pending is None:
        pending = {}
        manager.pending_txn_offsets = pending  # type: ignore[attr-defined]
    return pending


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
    group = coord.groups.get(group_id)
    if err == ErrorCode.NONE and group is None:
        group = GroupMetadata(group_id, coord.now())
        coord.groups[group_id] = group
    if err == ErrorCode.NONE:
        assert group is not None
        if group.is_state(GroupState.DEAD):
            err = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif member_id != UNKNOWN_MEMBER_ID and member_id not in group.members:
            err = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and generation_id != group.generation_id:
            err = ErrorCode.ILLEGAL_GENERATION
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
            mine = pending_of(coord.manager).setdefault(producer_id, {})
            mine.setdefault(group_id, {}).update(accepted)
        result.update(dict.fromkeys(accepted, stored))
    return result


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


def complete_txn_offsets(broker: Any, partition: int, producer_id: int, commit: bool) -> None:
    """The COMMIT/ABORT marker of ``producer_id`` reached ``__consumer_offsets-partition``."""
    coord = getattr(broker, "group_coordinator", None)
    if coord is None:
        return
    if partition in coord.manager.loading:
        # the loader may have read past this partition's end before the marker landed: it
        # settles the transaction when it installs what it read (``install_pending``)
        decisions = getattr(coord.manager, "txn_decisions", None)
        if decisions is None:
            decisions = coord.manager.txn_decisions = {}
        decisions.setdefault(partition, {})[producer_id] = commit
    pending = pending_of(coord.manager)
    groups = pending.get(producer_id)
    if not groups:
        return
    for group_id in [g for g in groups if coord.manager.partition_for(g) == partition]:
        offsets = groups.pop(group_id)
        if not commit:
            continue
        group = coord.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, coord.now())
            coord.groups[group_id] = group
        group.offsets.update(offsets)
    if not groups:
        pending.pop(producer_id, None)


def has_pending(manager: GroupMetadataManager, group_id: str, tp: TopicPartition) -> bool:
    """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for these."""
    return any(tp in g.get(group_id, {}) for g in pending_of(manager).values())


# -- loading -----------------------------------------------------------------------------------
def replay_txn_batch(out: LoadedPartition, batch: RecordBatch) -> None:
    """A transactional batch of ``__consumer_offsets`` during load: data waits for its
    producer's marker; COMMIT moves it into the partition's last-value map, ABORT drops it."""
    txn: dict[int, dict[bytes, tuple[int, bytes | None]]] = out.txn_pending
    pid = batch.producer_id
    if batch.is_control:
        records = txn.pop(pid, {})
        if batch.control_type() is ControlRecordType.COMMIT:
            for key, val in records.items():
                out.latest.pop(key, None)
                out.latest[key] = val
        return
    mine = txn.setdefault(pid, {})
    for rec in batch.iter_records():
        if rec.key is not None:
            mine[rec.key] = (rec.offset, rec.value)


def install_pending(manager: GroupMetadataManager, out: LoadedPartition,
                    partition: int) -> None:
    """Transactions still undecided at the end of what the loader read: their offsets wait
    again, unless their marker landed while the partition was loading."""
    decided: dict[int, bool] = getattr(manager, "txn_decisions", {}).pop(partition, {})
    pending = pending_of(manager)
    for pid, records in list(out.txn_pending.items()):
        if pid in decided:
            records = out.txn_pending.pop(pid)
            if decided[pid]:
                for key, val in records.items():
                    out.latest.pop(key, None)
                    out.latest[key] = val
    for pid, records in out.txn_pending.items():
        for key, (_, value) in records.items():
            try:
                k = decode_key(key)
                if not isinstance(k, OffsetKey) or value is None:
                    continue
                o = decode_offset_value(value)
            except (SchemaError, UnicodeDecodeError):
                continue
            tp = TopicPartition(k.topic, k.partition)
            pending.setdefault(pid, {}).setdefault(k.group, {})[tp] = o
    out.txn_pending.clear()
