"""A KIP-848 consumer group's state (Kafka's ConsumerGroup and ConsumerGroupMember) and
``replay``: how each ``__consumer_offsets`` record changes it.

The coordinator never changes a group directly: it writes records and replays them, and a
load replays the same records, so what a restart restores is what was written.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from tidelog.server.coordinator.group.consumer.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ConsumerKey,
    MemberAssignment,
    MemberSubscription,
    TopicMetadata,
    decode_current_assignment,
    decode_epoch,
    decode_member_metadata,
    decode_partition_metadata,
    decode_target_member,
)
from tidelog.server.coordinator.group.records import OffsetAndMetadata
from tidelog.util.scheduler import ScheduledTask
from tidelog.util.topic_partition import TopicPartition

CONSUMER_GROUP_TYPE = "consumer"
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ConsumerGroupMember:
    member_id: str
    subscription: MemberSubscription = field(default_factory=MemberSubscription)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_task: ScheduledTask | None = None
    rebalance_task: ScheduledTask | None = None
    join_task: ScheduledTask | None = None  # a classic member told to rejoin must, in time

    def assignment(self) -> MemberAssignment:
        return MemberAssignment(self.member_epoch, self.previous_member_epoch, int(self.state),
                                self.assigned, self.pending_revocation)

    def cancel_timers(self) -> None:
        for task in (self.session_task, self.rebalance_task, self.join_task):
            if task is not None:
                task.cancel()
        self.session_task = self.rebalance_task = self.join_task = None


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> member holding it

    @property
    def protocol_type(self) -> str:
        return CONSUMER_GROUP_TYPE

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition (assigned or being revoked), or -1
        when it is free to go to its next owner."""
        owner = self.owners.get((topic_id, partition))
        member = self.members.get(owner) if owner is not None else None
        return -1 if member is None else member.member_epoch

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for m in self.members.values():
            if m.subscription.instance_id == instance_id:
                return m
        return None

    def _set_owned(self, member: ConsumerGroupMember, assigned: Assignment,
                   pending: Assignment) -> None:
        for a in (member.assigned, member.pending_revocation):
            for topic_id, parts in a.items():
                for p in parts:
                    if self.owners.get((topic_id, p)) == member.member_id:
                        del self.owners[(topic_id, p)]
        member.assigned, member.pending_revocation = assigned, pending
        for a in (assigned, pending):
            for topic_id, parts in a.items():
                for p in parts:
                    self.owners[(topic_id, p)] = member.member_id


def replay(groups: dict[str, ConsumerGroup], key: ConsumerKey, value: bytes | None) -> None:
    """Apply one consumer group record, as Kafka's GroupMetadataManager.replay does."""
    t = key.record_type
    group = groups.get(key.group)
    if group is None:
        if value is None:
            return
        group = groups[key.group] = ConsumerGroup(key.group)
    if t == GROUP_METADATA:
        if value is None:
            groups.pop(key.group, None)
        else:
            group.group_epoch = decode_epoch(value)
    elif t == PARTITION_METADATA:
        group.subscription_metadata = {} if value is None else decode_partition_metadata(value)
    elif t == TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = 0 if value is None else decode_epoch(value)
    elif t == TARGET_ASSIGNMENT_MEMBER:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = decode_target_member(value)
    elif t == MEMBER_METADATA:
        _replay_member(group, key.member_id, value)
    elif t == CURRENT_MEMBER_ASSIGNMENT:
        _replay_assignment(group, key.member_id, value)


def _replay_member(group: ConsumerGroup, member_id: str, value: bytes | None) -> None:
    if value is None:
        member = group.members.pop(member_id, None)
        if member is not None:
            group._set_owned(member, {}, {})
            member.cancel_timers()
        return
    member = group.members.get(member_id)
    if member is None:
        member = group.members[member_id] = ConsumerGroupMember(member_id)
    member.subscription = decode_member_metadata(value)


def _replay_assignment(group: ConsumerGroup, member_id: str, value: bytes | None) -> None:
    member = group.members.get(member_id)
    if member is None:
        if value is None:
            return
        member = group.members[member_id] = ConsumerGroupMember(member_id)
    if value is None:
        group._set_owned(member, {}, {})
        member.member_epoch, member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH, -1
        member.state = MemberState.STABLE
        return
    a = decode_current_assignment(value)
    member.member_epoch, member.previous_member_epoch = a.member_epoch, a.previous_member_epoch
    try:
        member.state = MemberState(a.state)
    except ValueError:
        member.state = MemberState.UNKNOWN
    group._set_owned(member, a.assigned, a.pending_revocation)
