"""Online migration between classic groups and consumer groups (Kafka 4.x's
``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or disabled).

Upgrade: a consumer-protocol member joining a classic group that has members (of the
``consumer`` protocol type) turns it into a consumer group (Kafka's
GroupMetadataManager.convertToConsumerGroup): each classic member becomes a member with its
classic metadata (session timeout, protocols), its classic assignment as its current and
target assignment, at the classic generation as its epoch; the joining member then bumps the
group epoch and the assignor moves partitions, each given up by its holder before it goes on.

Classic members of a consumer group keep JoinGroup, SyncGroup, Heartbeat and LeaveGroup
(classicGroupJoinToConsumerGroup and the others): a JoinGroup is answered at once with the
member's epoch as the generation and no member list (nobody assigns: the coordinator does),
a SyncGroup with the member's assigned partitions in the consumer protocol's assignment
format, and a Heartbeat with REBALANCE_IN_PROGRESS when the group moved on or the member has
partitions to give up or to receive, so that it rejoins (an eager classic consumer revokes
everything first, then gets what it keeps plus what was freed for it).

Downgrade: when the last consumer-protocol member leaves (or is fenced) and classic members
remain, the group turns back into a classic group with those members at the group epoch as
the generation (convertToClassicGroup) and prepares a rebalance, so they rejoin as classic
members. Offsets stay with the group both ways.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.consumer.coordinator import (
    ConsumerGroupCoordinator,
    HeartbeatRequest,
)
from tidelog.server.coordinator.group.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    replay,
)
from tidelog.server.coordinator.group.consumer.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Assignment,
    ClassicMemberMetadata,
    MemberAssignment,
    MemberSubscription,
    Record,
    decode_consumer_key,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_partition_metadata,
    encode_target_member,
    group_tombstones,
)
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.member import (
    JoinRequest,
    JoinResult,
    MemberMetadata,
    SyncRequest,
    SyncResult,
)
from tidelog.server.coordinator.group.records import encode_group_key
from tidelog.server.coordinator.record_codec import kafka_uuid

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    """A ConsumerProtocolSubscription (v0-v3)."""

    topics: tuple[str, ...]
    owned: dict[str, tuple[int, ...]]
    rack_id: str | None = None


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def unpack(self, fmt: str) -> int:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(v)

    def string(self) -> str | None:
        n = self.unpack(">h")
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ValueError("string past the end")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def skip_bytes(self) -> None:
        n = self.unpack(">i")
        self.pos += max(n, 0)

    def partitions(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for _ in range(max(self.unpack(">i"), 0)):
            topic = self.string() or ""
            out[topic] = tuple(self.unpack(">i") for _ in range(max(self.unpack(">i"), 0)))
        return out


def decode_subscription(data: bytes) -> ClassicSubscription:
    c = _Cursor(data)
    version = c.unpack(">h")
    topics = tuple(c.string() or "" for _ in range(max(c.unpack(">i"), 0)))
    c.skip_bytes()  # user data
    owned = c.partitions() if version >= 1 and c.pos < len(data) else {}
    if version >= 2 and c.pos < len(data):
        c.unpack(">i")  # generation
    rack = c.string() if version >= 3 and c.pos < len(data) else None
    return ClassicSubscription(topics, owned, rack)


def encode_assignment(version: int, partitions: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment (no user data)."""
    out = [struct.pack(">hi", max(min(version, 3), 0), len(partitions))]
    for topic, parts in sorted(partitions.items()):
        t = topic.encode("utf-8")
        out.append(struct.pack(">h", len(t)) + t + struct.pack(">i", len(parts)))
        out.append(b"".join(struct.pack(">i", p) for p in sorted(parts)))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def decode_assignment(data: bytes) -> dict[str, tuple[int, ...]]:
    if len(data) < 2:
        return {}
    c = _Cursor(data)
    c.unpack(">h")
    return c.partitions()


class Migration:
    """The policy and the conversions; the classic coordinator registers a downgraded group
    through ``on_downgraded`` (its timers, its rebalance)."""

    def __init__(self, consumer: ConsumerGroupCoordinator,
                 on_downgraded: Callable[[GroupMetadata], None]) -> None:
        self.consumer = consumer
        self.on_downgraded = on_downgraded

    def _policy(self) -> str:
        return self.consumer.config.group_consumer_migration_policy.lower()

    def _ids(self, names: dict[str, tuple[int, ...]]) -> Assignment:
        topics = self.consumer.topics()
        return {topics[n].topic_id: frozenset(ps) for n, ps in names.items()
                if n in topics and ps}

    def _names(self, a: Assignment) -> dict[str, list[int]]:
        by_id = {t.topic_id: t.name for t in self.consumer.topics().values()}
        return {by_id[t]: sorted(ps) for t, ps in a.items() if t in by_id}

    # ------------------------------------------------------------------ upgrade

    def upgrade(self, classic: GroupMetadata) -> ConsumerGroup | None:
        """The classic group as a consumer group, or None when the policy or the group does
        not allow it (the join is refused)."""
        c = self.consumer
        if self._policy() not in ("bidirectional", "upgrade") or \
                classic.protocol_type != CONSUMER_PROTOCOL_TYPE or \
                len(classic.members) > c.config.group_consumer_max_size or \
                classic.protocol_name is None:
            return None
        gid, epoch = classic.group_id, classic.generation_id
        records: list[Record] = []
        for m in classic.members.values():
            try:
                sub = decode_subscription(m.metadata(classic.protocol_name))
                assigned = self._ids(decode_assignment(m.assignment))
            except (KeyError, ValueError, struct.error):
                log.warning("cannot upgrade group %s: member %s has a malformed consumer "
                            "protocol", gid, m.member_id)
                return None
            subscription = MemberSubscription(
                m.client_id, m.client_host, tuple(sorted(sub.topics)), None,
                m.rebalance_timeout_ms, None, m.group_instance_id, sub.rack_id or None,
                ClassicMemberMetadata(m.session_timeout_ms, tuple(m.supported_protocols)))
            records += [
                (encode_key(MEMBER_METADATA, gid, m.member_id),
                 encode_member_metadata(subscription)),
                (encode_key(TARGET_ASSIGNMENT_MEMBER, gid, m.member_id),
                 encode_target_member(assigned)),
                (encode_key(CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id),
                 encode_current_assignment(MemberAssignment(
                     epoch, epoch - 1, int(MemberState.STABLE), assigned, {}))),
            ]
        staged: dict[str, ConsumerGroup] = {}
        self._replay(staged, records)
        group = staged[gid] if gid in staged else ConsumerGroup(gid)
        metadata = c._subscription_metadata(c._subscriptions(group, {}))
        records += [(encode_key(PARTITION_METADATA, gid), encode_partition_metadata(metadata)),
                    (encode_key(GROUP_METADATA, gid), encode_epoch(epoch)),
                    (encode_key(TARGET_ASSIGNMENT_METADATA, gid), encode_epoch(epoch))]
        c.manager.append_records(gid, [(encode_group_key(gid), None), *records])
        self._end_classic(classic)
        del c.manager.groups[gid]
        self._replay(c.groups, records)
        upgraded = c.groups[gid]
        upgraded.offsets = classic.offsets
        for member in upgraded.members.values():
            c._schedule_timers(gid, member)
        log.info("classic group %s upgraded to a consumer group at epoch %d with %d members",
                 gid, epoch, len(upgraded.members))
        return upgraded

    @staticmethod
    def _replay(groups: dict[str, ConsumerGroup], records: list[Record]) -> None:
        for key, value in records:
            replay(groups, decode_consumer_key(key), value)

    @staticmethod
    def _end_classic(classic: GroupMetadata) -> None:
        """Waiting joins and syncs are told REBALANCE_IN_PROGRESS (they rejoin the consumer
        group); the classic timers stop."""
        classic.end_members(ErrorCode.REBALANCE_IN_PROGRESS)

    # ------------------------------------------------------------------ classic members

    def join(self, req: JoinRequest) -> JoinResult:
        """JoinGroup of a classic member to a consumer group: answered at once."""
        c = self.consumer
        group = c.groups[req.group_id]
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        member_id = req.member_id or kafka_uuid(uuid.uuid4())
        if not req.member_id and req.require_known_member_id:
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        existing = group.members.get(member_id) if req.member_id else None
        if existing is not None and existing.subscription.classic is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        try:
            sub = decode_subscription(req.protocols[0][1])
        except (ValueError, struct.error):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        epoch = existing.member_epoch if existing is not None else 0
        if existing is not None and existing.join_task is not None:
            existing.join_task.cancel()
            existing.join_task = None
        hb = HeartbeatRequest(
            req.group_id, member_id, epoch, instance_id=req.group_instance_id,
            rack_id=sub.rack_id or None, rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(sub.topics)),
            owned=self._ids(sub.owned) if epoch else {},
            client_id=req.client_id, client_host=req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols)))
        r = c.heartbeat(hb)
        log.info("consumer group %s: classic member %s joined at epoch %d: %s",
                 req.group_id, member_id, r.member_epoch, r.error.name)
        if r.error != ErrorCode.NONE:
            return JoinResult(r.error, member_id=member_id)
        return JoinResult(ErrorCode.NONE, generation_id=r.member_epoch,
                          protocol_type=CONSUMER_PROTOCOL_TYPE,
                          protocol_name=req.protocols[0][0], leader_id="",
                          member_id=member_id, members=[])

    def _classic_member(self, group_id: str, member_id: str
                        ) -> tuple[ConsumerGroup, ConsumerGroupMember] | ErrorCode:
        group = self.consumer.groups[group_id]
        member = group.members.get(member_id)
        if member is None or member.subscription.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return group, member

    def sync(self, req: SyncRequest) -> SyncResult:
        found = self._classic_member(req.group_id, req.member_id)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        group, member = found
        classic = member.subscription.classic
        assert classic is not None
        if req.generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        names = [n for n, _ in classic.protocols]
        if (req.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE)
                or (req.protocol_name is not None and req.protocol_name not in names)):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and \
                member.state != MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(group.group_id, member)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.consumer._schedule_timers(group.group_id, member)
        version = struct.unpack_from(">h", classic.protocols[0][1])[0] \
            if len(classic.protocols[0][1]) >= 2 else 0
        return SyncResult(ErrorCode.NONE, CONSUMER_PROTOCOL_TYPE,
                          req.protocol_name or names[0],
                          encode_assignment(version, self._names(member.assigned)))

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> ErrorCode:
        found = self._classic_member(group_id, member_id)
        if isinstance(found, ErrorCode):
            return found
        group, member = found
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumer._schedule_timers(group_id, member)
        if (member.member_epoch < group.group_epoch
                or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not _waiting_on_unreleased(group, member))):
            self._expect_rejoin(group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _expect_rejoin(self, group_id: str, member: ConsumerGroupMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent: a classic member told to rejoin
        that does not within its rebalance timeout is removed (its partitions go on)."""
        if member.join_task is None or member.join_task.cancelled:
            c = self.consumer
            member.join_task = c.scheduler.schedule(
                f"classic-join-{group_id}-{member.member_id}",
                c._fence_later(group_id, member.member_id, None, "did not rejoin in time"),
                max(member.subscription.rebalance_timeout_ms, 0))

    def leave(self, group_id: str, members: Sequence[tuple[str, str | None]]
              ) -> tuple[ErrorCode, list[ErrorCode]]:
        out = []
        for member_id, instance_id in members:
            group = self.consumer.groups.get(group_id)
            if group is None:
                out.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if instance_id is not None:
                static = group.static_member(instance_id)
                member_id = static.member_id if static is not None else member_id
            found = self._classic_member(group_id, member_id)
            if isinstance(found, ErrorCode):
                out.append(found)
                continue
            log.info("consumer group %s: classic member %s left", group_id, member_id)
            self.consumer._fence(found[0], found[1])
            out.append(ErrorCode.NONE)
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ downgrade

    def maybe_downgrade(self, group_id: str) -> bool:
        """After a consumer-protocol member left: a group of classic members only becomes a
        classic group again (and rebalances)."""
        c = self.consumer
        group = c.groups.get(group_id)
        if group is None or not group.members or \
                self._policy() not in ("bidirectional", "downgrade") or \
                any(m.subscription.classic is None for m in group.members.values()) or \
                len(group.members) > c.config.group_max_size:
            return False
        classic = self._classic_group(group)
        records: list[Record] = []
        for mid in group.members:
            records += [(encode_key(t, group_id, mid), None)
                        for t in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER,
                                  MEMBER_METADATA)]
        c.manager.append_records(group_id, records + group_tombstones(group_id))
        for m in group.members.values():
            m.cancel_timers()
        del c.groups[group_id]
        c.manager.store_group(classic)
        c.manager.groups[group_id] = classic
        log.info("consumer group %s downgraded to a classic group at generation %d with %d "
                 "members", group_id, classic.generation_id, len(classic.members))
        self.on_downgraded(classic)
        return True

    def _classic_group(self, group: ConsumerGroup) -> GroupMetadata:
        now = self.consumer.clock.milliseconds()
        classic = GroupMetadata(group.group_id, now, GroupState.STABLE)
        classic.generation_id = group.group_epoch
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        first: list[str] = []
        common: set[str] | None = None
        for m in group.members.values():
            meta = m.subscription.classic
            assert meta is not None
            names = [n for n, _ in meta.protocols]
            first = first or names
            common = set(names) if common is None else common & set(names)
        classic.protocol_name = next((n for n in first if common and n in common),
                                     first[0] if first else None)
        for m in group.members.values():
            meta = m.subscription.classic
            assert meta is not None
            version = struct.unpack_from(">h", meta.protocols[0][1])[0] \
                if meta.protocols and len(meta.protocols[0][1]) >= 2 else 0
            classic.add(MemberMetadata(
                m.member_id, m.subscription.instance_id, m.subscription.client_id,
                m.subscription.client_host, max(m.subscription.rebalance_timeout_ms, 0),
                meta.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(meta.protocols),
                assignment=encode_assignment(version, self._names(m.assigned))))
        classic.offsets = group.offsets
        return classic


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target is still
    held by another member."""
    for topic_id, parts in group.target.get(member.member_id, {}).items():
        have = member.assigned.get(topic_id, frozenset())
        for p in parts:
            if p not in have and group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False
