"""A classic group's state (Kafka's GroupMetadata): members, generation, protocol, offsets."""

from __future__ import annotations

import enum
import struct

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.member import (
    JoinMember,
    JoinResult,
    MemberMetadata,
    Protocols,
    SyncResult,
)
from tidelog.server.coordinator.group.records import OffsetAndMetadata
from tidelog.util.scheduler import ScheduledTask
from tidelog.util.topic_partition import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class IllegalStateError(RuntimeError):
    pass


class GroupMetadata:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: dict[str, ScheduledTask | None] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.new_member_added = False
        self.join_task: ScheduledTask | None = None
        self.join_deadline_ms = 0
        self.sync_task: ScheduledTask | None = None
        self.initial_delay_active = False
        self.pending_sync: set[str] = set()  # members yet to send SyncGroup this generation

    # -------------------------------------------------------------- state

    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalStateError(
                f"Group {self.group_id} should be in {sorted(s.value for s in _VALID_PREVIOUS[state])}"
                f" to move to {state.value} but is in {self.state.value}"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -------------------------------------------------------------- members

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def end_members(self, error: ErrorCode) -> None:
        """Stop the group's timers and answer its waiting joins and syncs with ``error``
        (the group leaves this coordinator, or becomes a consumer group)."""
        for task in (self.join_task, self.sync_task, *self.pending_members.values()):
            if task is not None:
                task.cancel()
        for member in self.members.values():
            member.cancel_heartbeat()
            member.complete_join(JoinResult(error, member_id=member.member_id))
            member.complete_sync(SyncResult(error))

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_heartbeat()
        self.pending_sync.discard(member_id)
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            # Prefer a member that already rejoined so the next leader answers this round.
            joined = [m for m in self.members.values() if m.is_awaiting_join]
            pool = joined or list(self.members.values())
            self.leader_id = pool[0].member_id if pool else None
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.cancel_heartbeat()
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -------------------------------------------------------------- protocols

    def candidate_protocols(self) -> set[str]:
        sets = [m.protocols() for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        names = {n for n, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its preferred candidate; most votes wins (ties: first seen)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateError(f"no protocol common to the members of {self.group_id}")
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.new_member_added = False

    def current_member_metadata(self) -> list[JoinMember]:
        assert self.protocol_name is not None
        return [
            JoinMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    # -------------------------------------------------------------- subscriptions

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to; None when not knowable (other types)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= parse_subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError, struct.error):
                return None
        return topics


def parse_subscription_topics(data: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topics come first)."""
    pos = 2  # version
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    topics: set[str] = set()
    for _ in range(max(count, 0)):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        if n < 0 or pos + n > len(data):
            raise ValueError("bad topic string in subscription")
        topics.add(data[pos : pos + n].decode("utf-8"))
        pos += n
    return topics
