"""The groups cache and its persistence in ``__consumer_offsets`` (Kafka's GroupMetadataManager).

Every change a client must be able to rely on (a commit, a generation's assignment, a
deletion) is appended to the group's partition first and applied to the cache after, so the
cache never says more than the log. Loading replays a partition: the last record per key wins
and a null value (tombstone) removes the key, exactly what compaction preserves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.group import ConsumerGroup, replay
from tidelog.server.coordinator.group.consumer.records import (
    CONSUMER_KEY_TYPES,
    decode_consumer_key,
    group_tombstones,
)
from tidelog.server.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, GroupMetadata, GroupState
from tidelog.server.coordinator.group.member import MemberMetadata
from tidelog.server.coordinator.group.pending_commits import PendingCommit, PendingCommits
from tidelog.server.coordinator.group.pending_offsets import (
    LoadedPartition,
    PendingTxnOffsets,
    replay_txn_batch,
)
from tidelog.server.coordinator.group.records import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetAndMetadata,
    OffsetKey,
    UnknownKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from tidelog.server.coordinator.record_codec import SchemaError
from tidelog.server.coordinator.runtime import CoordinatorPartitions
from tidelog.server.coordinator.store import OffsetsStore
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


@dataclass
class _Decoded:
    """What survives of a replayed partition, decoded once per key."""

    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)
    consumer: list[Record] = field(default_factory=list)  # KIP-848 records, in log order


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, *, clock: Clock, store: OffsetsStore) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.groups: dict[str, GroupMetadata] = {}
        self.partitions = CoordinatorPartitions()  # load states (the coordinator runtime's)
        self.pending_txn = PendingTxnOffsets()
        # in a cluster a commit reaches the cache only once replicated (pending_commits.py)
        self.confirm_writes = False
        self.pending_commits = PendingCommits()
        self.consumer_groups: dict[str, ConsumerGroup] = {}

    # -------------------------------------------------------------- ownership / loading

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.partitions.loading

    def is_owned(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.partitions.owned

    def mark_loading(self, partitions: Iterable[int]) -> None:
        self.partitions.mark_loading(partitions)

    def load_partition(self, partition: int) -> list[GroupMetadata]:
        """Replay one partition into the cache; returns the groups it defined."""
        self.partitions.mark_loading((partition,))
        data = LoadedPartition()
        for batch in self.store.read_batches(partition):
            self.replay_batch(data, partition, batch)
        return self.complete_load(partition, data)

    def complete_load(self, partition: int, loaded: LoadedPartition) -> list[GroupMetadata]:
        """Install what a replay found; the partition stops answering LOAD_IN_PROGRESS."""
        self.pending_txn.install(loaded, partition)
        data = self._decode_latest(partition, loaded)
        installed: list[GroupMetadata] = []
        now = self.clock.milliseconds()
        for key, raw in data.consumer:
            try:
                replay(self.consumer_groups, decode_consumer_key(key), raw)
            except (SchemaError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable consumer group record of %s-%d: %s",
                            OFFSETS_TOPIC, partition, exc)
        with_offsets = {g for g, offsets in data.offsets.items() if offsets}
        for group_id in with_offsets & set(self.consumer_groups):
            self.consumer_groups[group_id].offsets = data.offsets.pop(group_id)
        with_offsets -= set(self.consumer_groups)
        for group_id in with_offsets | set(data.groups):
            value = data.groups.get(group_id)
            group = self._group_from_value(group_id, value, now)
            group.offsets = data.offsets.get(group_id, {})
            self.groups[group_id] = group
            installed.append(group)
        for group_id in data.removed_groups - set(data.groups) - with_offsets:
            self.groups.pop(group_id, None)
        self.partitions.activate(partition)
        return installed

    def replay_batch(self, out: LoadedPartition, partition: int, batch: RecordBatch) -> None:
        """Apply one batch: the last record per key wins (a tombstone too), as compaction."""
        if batch.is_transactional:  # TxnOffsetCommit data and its markers
            replay_txn_batch(out, batch)
            return
        if batch.is_control:
            return
        latest = out.latest
        for rec in batch.iter_records():
            key = rec.key
            if key is not None:
                latest.pop(key, None)  # keep dict order = order of the last write
                latest[key] = (rec.offset, rec.value)

    def _decode_latest(self, partition: int, loaded: LoadedPartition) -> _Decoded:
        out = _Decoded()
        for key, (offset, value) in loaded.latest.items():
            try:
                self._replay_record(out, key, value)
            except (SchemaError, UnicodeDecodeError) as exc:
                # One unreadable record must not cost every group of the partition.
                log.warning(
                    "skipping unreadable record at offset %d of %s-%d: %s",
                    offset,
                    OFFSETS_TOPIC,
                    partition,
                    exc,
                )
        loaded.latest.clear()
        return out

    @staticmethod
    def _replay_record(out: _Decoded, key_bytes: bytes, value: bytes | None) -> None:
        key = decode_key(key_bytes)
        if isinstance(key, UnknownKey):
            if key.version in CONSUMER_KEY_TYPES:
                decode_consumer_key(key_bytes)  # unreadable: skipped here, not at install
                out.consumer.append((key_bytes, value))
        elif isinstance(key, OffsetKey):
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                out.offsets.get(key.group, {}).pop(tp, None)
            else:
                out.offsets.setdefault(key.group, {})[tp] = decode_offset_value(value)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                out.groups.pop(key.group, None)
                out.removed_groups.add(key.group)
            else:
                out.groups[key.group] = decode_group_value(value)

    @staticmethod
    def _group_from_value(
        group_id: str, value: GroupMetadataValue | None, now: int
    ) -> GroupMetadata:
        group = GroupMetadata(group_id, now)
        if value is None:
            return group
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.current_state_timestamp = value.current_state_timestamp
        for m in value.members:
            member = MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                supported_protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member)
        group.leader_id = value.leader
        if group.members:
            group.state = GroupState.STABLE
        return group

    # -------------------------------------------------------------- writes

    def append_records(self, group_id: str, records: list[Record]) -> None:
        """Append records of one group to its partition, as one batch (all or none)."""
        if records:
            self._append(self.partition_for(group_id), records)

    def _append(self, partition: int, records: list[Record]) -> int:
        """Append one batch; returns the log offset after it."""
        builder = RecordBatchBuilder(CompressionType(self.config.offsets_topic_compression_codec))
        now = self.clock.milliseconds()
        for key, value in records:
            builder.append(now, key, value)
        return self.store.append(partition, builder.build()) + len(records)

    def store_group(self, group: GroupMetadata) -> None:
        """Persist the group's current generation and assignment (Kafka's storeGroup)."""
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp,
            members=[_member_record(m, group.protocol_name) for m in group.members.values()],
        )
        record = (encode_group_key(group.group_id), encode_group_value(value))
        self._append(self.partition_for(group.group_id), [record])

    def store_offsets(
        self, group: GroupMetadata | ConsumerGroup, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        if not offsets:
            return
        records: list[Record] = [
            (encode_offset_key(group.group_id, tp.topic, tp.partition), encode_offset_value(o))
            for tp, o in offsets.items()
        ]
        partition = self.partition_for(group.group_id)
        end = self._append(partition, records)
        if self.confirm_writes:  # applied once replicated (complete_commits)
            self.pending_commits.add(partition, PendingCommit(group, dict(offsets), end))
        else:
            group.offsets.update(offsets)

    def complete_commits(self, partition: int, up_to: int | None, replicated: bool) -> None:
        """The wait for ``partition``'s writes up to ``up_to`` (None: all so far) ended:
        the offset commits staged up to there go into the cache, or are dropped when the
        writes were not replicated (Kafka's onOffsetCommitAppend / failPendingOffsetWrite)."""
        self.pending_commits.complete(partition, up_to, replicated)

    def delete_offsets(self, group: GroupMetadata | ConsumerGroup, partitions: Iterable[TopicPartition]) -> None:
        tps = [tp for tp in partitions if tp in group.offsets]
        if not tps:
            return
        records: list[Record] = [
            (encode_offset_key(group.group_id, tp.topic, tp.partition), None) for tp in tps
        ]
        self._append(self.partition_for(group.group_id), records)
        for tp in tps:
            group.offsets.pop(tp, None)

    def delete_group(self, group: GroupMetadata) -> None:
        """Tombstones for every offset and the metadata; the group becomes Dead."""
        records: list[Record] = [
            (encode_offset_key(group.group_id, tp.topic, tp.partition), None)
            for tp in group.offsets
        ]
        records.append((encode_group_key(group.group_id), None))
        self._append(self.partition_for(group.group_id), records)
        group.offsets.clear()
        group.transition_to(GroupState.DEAD, self.clock.milliseconds())
        self.groups.pop(group.group_id, None)

    # -------------------------------------------------------------- expiry

    def expired_offsets(self, group: GroupMetadata, now: int) -> list[TopicPartition]:
        """Kafka's rules (KIP-211): an Empty group's offsets expire ``retention`` after it
        became empty; a consumer group's offsets for topics it no longer subscribes to expire
        ``retention`` after their commit; an explicit expire timestamp always wins."""
        retention = self.config.offsets_retention_ms
        if group.is_state(GroupState.EMPTY):
            candidates = list(group.offsets)
            # A group with a protocol type ages from when it became empty, a standalone
            # (offsets-only) group from each commit.
            from_state = group.protocol_type is not None
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_state(GroupState.STABLE):
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return []
            candidates = [tp for tp in group.offsets if tp.topic not in subscribed]
            from_state = False
        else:
            return []
        out = []
        for tp in candidates:
            o = group.offsets[tp]
            if o.expire_timestamp is not None:
                deadline = o.expire_timestamp
            elif from_state:
                deadline = max(group.current_state_timestamp, 0) + retention
            else:
                deadline = o.commit_timestamp + retention
            if now >= deadline:
                out.append(tp)
        return out

    def cleanup_expired_offsets(self) -> int:
        """Expire offsets everywhere; empty groups without offsets die. Returns the count."""
        now = self.clock.milliseconds()
        removed = 0
        for group in list(self.groups.values()):
            expired = self.expired_offsets(group, now)
            if expired:
                self.delete_offsets(group, expired)
                removed += len(expired)
            if (group.is_state(GroupState.EMPTY) and not group.offsets and not group.members
                    and not self.pending_commits.has_pending(group)):  # fmt: skip
                self.delete_group(group)
        return removed + self._expire_consumer_offsets(now)

    def _expire_consumer_offsets(self, now: int) -> int:
        """A consumer group without members: each offset ``retention`` after its commit
        (or at its explicit expiry); the group goes once its last offset has."""
        removed = 0
        for group in [g for g in self.consumer_groups.values() if not g.members]:
            retention = self.config.offsets_retention_ms
            expired = [tp for tp, o in group.offsets.items()
                       if now >= (o.expire_timestamp if o.expire_timestamp is not None
                                  else o.commit_timestamp + retention)]
            if expired:
                self.delete_offsets(group, expired)
                removed += len(expired)
            if not group.offsets and not self.pending_commits.has_pending(group):
                self.append_records(group.group_id, group_tombstones(group.group_id))
                self.consumer_groups.pop(group.group_id, None)
        return removed


def _member_record(m: MemberMetadata, protocol: str | None) -> MemberMetadataRecord:
    subscription = b""
    if protocol is not None:
        try:
            subscription = m.metadata(protocol)
        except KeyError:
            subscription = b""
    return MemberMetadataRecord(
        member_id=m.member_id,
        client_id=m.client_id,
        client_host=m.client_host,
        session_timeout=m.session_timeout_ms,
        rebalance_timeout=m.rebalance_timeout_ms,
        subscription=subscription,
        assignment=m.assignment,
        group_instance_id=m.group_instance_id,
    )
