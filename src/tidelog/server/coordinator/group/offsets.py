"""OffsetCommit, OffsetFetch and OffsetDelete on top of the rebalance core."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.consumer.group import ConsumerGroup
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.member import UNKNOWN_MEMBER_ID
from tidelog.server.coordinator.group.rebalance import RebalanceCore
from tidelog.server.coordinator.group.records import OffsetAndMetadata
from tidelog.util.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class CommitEntry:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


INVALID_OFFSET = FetchedOffset(-1, -1, "")


class OffsetsApi(RebalanceCore):
    def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, CommitEntry],
        *,
        member_id: str = UNKNOWN_MEMBER_ID,
        generation_id: int = -1,
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        api_version: int = 9,
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's OffsetMetadataManager.commitOffset: an error for every partition."""
        err = self._commit_target(group_id, member_id, generation_id, api_version)
        if err != ErrorCode.NONE:
            return dict.fromkeys(offsets, err)
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self._store_commits(consumer_group, offsets, retention_time_ms)
        group = self.groups.get(group_id)
        if group is None:  # generation -1: a simple group (manual assignment, admin tools)
            group = GroupMetadata(group_id, self.now())
            self.groups[group_id] = group
        err = self._validate_commit(group, member_id, generation_id, group_instance_id)
        if err != ErrorCode.NONE:
            return dict.fromkeys(offsets, err)
        member = group.members.get(member_id)
        if member is not None:
            self._complete_and_schedule_heartbeat(group, member)
        return self._store_commits(group, offsets, retention_time_ms)

    def _commit_target(
        self, group_id: str, member_id: str, generation_id: int, api_version: int
    ) -> ErrorCode:
        """Kafka's validateOffsetCommit up to the group's own check: a group that does not
        exist takes a commit only without a generation (it becomes a simple group); with
        one, v9+ answers GROUP_ID_NOT_FOUND and older versions ILLEGAL_GENERATION. A share
        group is no consumer group; a consumer group checks its member's epoch."""
        err = self.group_error(group_id, allow_empty=True)
        if err != ErrorCode.NONE:
            return err
        if group_id in self.share.groups:
            return ErrorCode.GROUP_ID_NOT_FOUND
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return validate_member_epoch(consumer_group, member_id, generation_id)
        if group_id in self.groups or generation_id < 0:
            return ErrorCode.NONE
        return ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION

    def _validate_commit(
        self, group: GroupMetadata, member_id: str, generation_id: int, instance_id: str | None
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit (not transactional)."""
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return ErrorCode.NONE  # no group management: any member id, an empty group
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            if group.is_static_member_fenced(instance_id, member_id):
                return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to an active group
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            # The member must sync the new generation's assignment before committing.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _store_commits(
        self,
        group: GroupMetadata | ConsumerGroup,
        offsets: Mapping[TopicPartition, CommitEntry],
        retention_time_ms: int,
    ) -> dict[TopicPartition, ErrorCode]:
        now = self.now()
        expire = now + retention_time_ms if retention_time_ms >= 0 else None
        result: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for tp, entry in offsets.items():
            metadata = entry.metadata or ""
            if len(metadata.encode("utf-8")) > limit:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[tp] = OffsetAndMetadata(
                entry.offset, metadata, now, entry.leader_epoch, expire
            )
        try:
            self.manager.store_offsets(group, accepted)
            stored = ErrorCode.NONE
        except OSError:
            stored = ErrorCode.COORDINATOR_NOT_AVAILABLE  # Kafka maps storage errors so
        for tp in accepted:
            result[tp] = stored
        return result

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
        """Committed offsets; ``partitions=None`` means every partition the group has.
        A consumer group's member (OffsetFetch v9+) must name its current epoch."""
        err = self.group_error(group_id, allow_empty=True)
        if err != ErrorCode.NONE:
            return err, {}
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None and (member_id or member_epoch >= 0):
            err = validate_member_epoch(consumer_group, member_id or "", member_epoch)
            if err != ErrorCode.NONE:
                return err, {}
        group = consumer_group if consumer_group is not None else self.groups.get(group_id)
        known = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, {tp: _fetched(o) for tp, o in known.items()}
        out: dict[TopicPartition, FetchedOffset] = {}
        for tp in partitions:
            o = known.get(tp)
            out[tp] = INVALID_OFFSET if o is None else _fetched(o)
        return ErrorCode.NONE, out

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (KIP-496): only partitions of topics the group does not consume."""
        err = self.group_error(group_id, allow_empty=True)
        if err != ErrorCode.NONE:
            return err, {}
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self._delete_consumer_offsets(consumer_group, partitions)
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        tps = list(partitions)
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = tps
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics() or set()
            eligible = [tp for tp in tps if tp.topic not in subscribed]
            errors.update(
                {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if tp.topic in subscribed}
            )
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        try:
            self.manager.delete_offsets(group, eligible)
        except OSError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors

    def _delete_consumer_offsets(
        self, group: ConsumerGroup, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        subscribed = set(group.subscription_metadata)
        tps = list(partitions)
        errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if tp.topic in subscribed}
        eligible = [tp for tp in tps if tp.topic not in subscribed]
        try:
            self.manager.delete_offsets(group, eligible)
        except OSError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return ErrorCode.NONE, errors

    def on_topics_deleted(self, topics: Iterable[str]) -> int:
        """Tombstone every committed offset of deleted topics (Kafka's
        GroupMetadataManager.cleanupGroupMetadata on topic deletion), so a re-created topic
        does not inherit old positions; share groups' state of those topics goes too. Returns the number of offsets removed."""
        gone = set(topics)
        self.share.forget_topics(gone)  # share-partition state is keyed by topic id too
        removed = 0
        groups: list[GroupMetadata | ConsumerGroup] = [*self.groups.values(),
                                                       *self.consumer.groups.values()]
        for group in groups:
            tps = [tp for tp in group.offsets if tp.topic in gone]
            if not tps:
                continue
            try:
                self.manager.delete_offsets(group, tps)
                removed += len(tps)
            except OSError:
                continue  # the next expiry run or deletion retries
        return removed


def validate_member_epoch(group: ConsumerGroup, member_id: str, epoch: int) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit/Fetch: without a member epoch (admin
    tools, standalone consumers) only an empty group; otherwise the member's current epoch."""
    if epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if epoch != member.member_epoch:  # a classic member names its generation
        return ErrorCode.STALE_MEMBER_EPOCH if member.subscription.classic is None \
            else ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def _fetched(o: OffsetAndMetadata) -> FetchedOffset:
    return FetchedOffset(o.offset, o.leader_epoch, o.metadata)
