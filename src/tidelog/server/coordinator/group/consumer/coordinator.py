"""The KIP-848 half of Kafka's GroupMetadataManager: ConsumerGroupHeartbeat, its timers and
ConsumerGroupDescribe, sans I/O.

A heartbeat (1) creates or updates the member and bumps the group epoch when its
subscription or the subscribed topics' metadata changed, (2) recomputes the target
assignment with the server-side assignor when the group epoch passed the assignment epoch,
(3) moves the member one step towards its target (reconcile.py). Every step is a record
appended to ``__consumer_offsets`` and then replayed into memory (group.replay), so a load
restores exactly what was written. A member that stops heartbeating for
``group.consumer.session.timeout.ms``, or keeps partitions it must revoke beyond its
rebalance timeout, is fenced: removed, and the group epoch bumped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.assignor import ASSIGNORS, PartitionAssignor
from tidelog.server.coordinator.group.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    replay,
)
from tidelog.server.coordinator.group.consumer.reconcile import (
    FencedMemberError,
    Reconciled,
    reconcile,
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
    TopicMetadata,
    decode_consumer_key,
    encode_current_assignment,
    encode_epoch,
    encode_key,
    encode_member_metadata,
    encode_partition_metadata,
    encode_target_member,
    group_tombstones,
)
from tidelog.server.coordinator.group.consumer.regex import InvalidRegex, RegexResolver
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.group_configs import GroupConfigStore
from tidelog.server.coordinator.group.records import encode_group_key, encode_offset_key
from tidelog.server.coordinator.record_codec import kafka_uuid
from tidelog.util.clock import Clock
from tidelog.util.scheduler import Scheduler

log = logging.getLogger(__name__)

TopicSource = Callable[[], Mapping[str, TopicMetadata]]


class GroupStore(Protocol):
    """What this coordinator needs of the groups cache (GroupMetadataManager): both kinds of
    groups, since one id names one group of either kind, and their ``__consumer_offsets``
    partition."""

    groups: dict[str, GroupMetadata]
    consumer_groups: dict[str, ConsumerGroup]

    def partition_for(self, group_id: str) -> int: ...

    def append_records(self, group_id: str, records: list[Record]) -> None: ...

    def store_group(self, group: GroupMetadata) -> None: ...


class MigrationHooks(Protocol):
    """Online migration (migration.py), set by the classic coordinator."""

    def upgrade(self, classic: GroupMetadata) -> ConsumerGroup | None: ...

    def maybe_downgrade(self, group_id: str) -> bool: ...


class ConsumerGroupError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    classic: ClassicMemberMetadata | None = None  # a classic member's JoinGroup


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    message: str | None = None


def _no_topics() -> Mapping[str, TopicMetadata]:
    return {}


class ConsumerGroupCoordinator:
    def __init__(self, config: GroupConfig, manager: GroupStore, *, clock: Clock,
                 scheduler: Scheduler, group_error: Callable[[str], ErrorCode]) -> None:
        self.config = config
        self.manager = manager
        self.clock = clock
        self.scheduler = scheduler
        self.group_error = group_error
        self.topics: TopicSource = _no_topics
        self.settings = GroupConfigStore(config)  # per-group overrides, shared by the owner
        self.regex = RegexResolver()
        self.migration: MigrationHooks | None = None

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self.manager.consumer_groups

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        if not req.member_id and req.member_epoch == 0:  # v0: the coordinator names it
            req = replace(req, member_id=kafka_uuid(uuid.uuid4()))
        try:
            self._validate(req)
            err = self.group_error(req.group_id)
            if err != ErrorCode.NONE:
                raise ConsumerGroupError(err)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except ConsumerGroupError as exc:
            return HeartbeatResult(exc.code, req.member_id, message=exc.message)
        except FencedMemberError as exc:
            return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH, req.member_id,
                                   message=str(exc))
        except OSError:
            return HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)

    def _validate(self, req: HeartbeatRequest) -> None:
        def invalid(message: str) -> ConsumerGroupError:
            return ConsumerGroupError(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        if not req.member_id and req.member_epoch != 0:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(req.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                              "first request.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and req.instance_id is None:
            raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self._assignors():
            raise ConsumerGroupError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self._assignors())}.")
        if req.subscribed_topic_regex is not None:
            self._compile(req.subscribed_topic_regex)

    def _assignors(self) -> list[str]:
        return [a for a in self.config.group_consumer_assignors if a in ASSIGNORS]

    def _compile(self, pattern: str) -> None:
        try:
            self.regex.compile(pattern)
        except InvalidRegex as exc:
            raise ConsumerGroupError(exc.code, str(exc)) from None

    def _heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self._group_for_join(req) if req.member_epoch == 0 else self.groups.get(
            req.group_id)
        if group is None:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Group {req.group_id} not found.")
        member = self._member_for(group, req)
        self.regex.resolve_pending(group.group_id)  # what an earlier heartbeat brought
        records, target_epoch, target = self._update_group(group, member, req)
        next_state = reconcile(member, target_epoch, target, req.owned,
                               group.current_partition_epoch)
        if _changed(member, next_state) or req.member_id not in group.members:
            records.append(_assignment_record(group.group_id, req.member_id, next_state))
        old_assigned = dict(member.assigned)
        self._write(group.group_id, records)
        member = self.groups[group.group_id].members[req.member_id]
        self._schedule_timers(group.group_id, member)
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1
                                         and req.subscribed_topic_names is not None
                                         and req.owned is not None)
        return HeartbeatResult(
            ErrorCode.NONE, member.member_id, member.member_epoch,
            self.settings.number(group.group_id, "consumer.heartbeat.interval.ms"),
            dict(member.assigned) if full or member.assigned != old_assigned else None)

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> ConsumerGroupMember:
        """The heartbeating member: known (epoch checked), new, or a static member's new
        incarnation taking over the one that left with epoch -2."""
        if req.instance_id is not None:
            static = group.static_member(req.instance_id)
            if static is not None and static.member_id != req.member_id:
                if req.member_epoch != 0:
                    raise ConsumerGroupError(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {req.member_id} with instance id {req.instance_id} "
                        f"was fenced by {static.member_id}.")
                if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise ConsumerGroupError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {static.member_id} with instance id "
                        f"{req.instance_id} is not released yet.")
                self._replace_static(group, static, req.member_id)
        member = group.members.get(req.member_id)
        if member is not None and req.member_epoch == 0 and member.member_epoch != 0:
            self._fence(group, member)  # a rejoin under the same id starts from scratch
            member = None
        if member is not None:
            _check_epoch(member, req.member_epoch, req.owned)
            return member
        if req.member_epoch != 0:
            raise ConsumerGroupError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.")
        if len(group.members) >= self.config.group_consumer_max_size:
            raise ConsumerGroupError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.")
        return ConsumerGroupMember(req.member_id)

    def _replace_static(self, group: ConsumerGroup, old: ConsumerGroupMember,
                        member_id: str) -> None:
        """Kafka's replaceMember: the new member id inherits the subscription, the target and
        the partitions, at epoch 0; no rebalance."""
        gid = group.group_id
        log.info("consumer group %s: static member %s replaces %s", gid, member_id,
                 old.member_id)
        kept = MemberAssignment(0, 0, int(MemberState.STABLE), old.assigned, {})
        old.cancel_timers()
        self._write(gid, [
            (encode_key(CURRENT_MEMBER_ASSIGNMENT, gid, old.member_id), None),
            (encode_key(TARGET_ASSIGNMENT_MEMBER, gid, old.member_id), None),
            (encode_key(MEMBER_METADATA, gid, old.member_id), None),
            (encode_key(MEMBER_METADATA, gid, member_id),
             encode_member_metadata(old.subscription)),
            (encode_key(TARGET_ASSIGNMENT_MEMBER, gid, member_id),
             encode_target_member(group.target.get(old.member_id, {}))),
            (encode_key(CURRENT_MEMBER_ASSIGNMENT, gid, member_id),
             encode_current_assignment(kept)),
        ])

    def _group_for_join(self, req: HeartbeatRequest) -> ConsumerGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        classic = self.manager.groups.get(req.group_id)
        if classic is not None and (classic.members or not classic.is_state(GroupState.EMPTY)):
            upgraded = self.migration.upgrade(classic) if self.migration is not None else None
            if upgraded is not None:
                return upgraded
            raise ConsumerGroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                     f"Group {req.group_id} is not a consumer group.")
        group = ConsumerGroup(req.group_id)
        if classic is not None:  # an empty classic group is upgraded; its offsets stay
            self.manager.append_records(req.group_id, [(encode_group_key(req.group_id), None)])
            group.offsets = classic.offsets
            del self.manager.groups[req.group_id]
            self.groups[req.group_id] = group
        return group

    def _update_group(self, group: ConsumerGroup, member: ConsumerGroupMember,
                      req: HeartbeatRequest) -> tuple[list[Record], int, Assignment]:
        """Steps 1 and 2: the member's subscription, the group epoch, the target."""
        gid = group.group_id
        old = member.subscription
        sub = MemberSubscription(
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=(req.subscribed_topic_names
                                    if req.subscribed_topic_names is not None
                                    else old.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex
                                    if req.subscribed_topic_regex is not None
                                    else old.subscribed_topic_regex),
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else old.rebalance_timeout_ms),
            server_assignor=req.server_assignor or old.server_assignor,
            instance_id=req.instance_id or old.instance_id,
            rack_id=req.rack_id or old.rack_id, classic=req.classic)
        is_new = member.member_id not in group.members
        self.regex.defer_if_new(gid, sub.subscribed_topic_regex, old.subscribed_topic_regex,
                                (m.subscription.subscribed_topic_regex
                                 for m in group.members.values() if m is not member))
        records: list[Record] = []
        if is_new or sub != old:
            records.append((encode_key(MEMBER_METADATA, gid, member.member_id),
                            encode_member_metadata(sub)))
        bump = is_new or (sub.subscribed_topic_names, sub.subscribed_topic_regex) != (
            old.subscribed_topic_names, old.subscribed_topic_regex)
        subs = self._subscriptions(group, {member.member_id: sub})
        metadata = self._subscription_metadata(subs)
        if metadata != group.subscription_metadata:
            records.append((encode_key(PARTITION_METADATA, gid),
                            encode_partition_metadata(metadata)))
            bump = True
        epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append((encode_key(GROUP_METADATA, gid), encode_epoch(epoch)))
        if epoch <= group.assignment_epoch:
            return records, group.assignment_epoch, group.target.get(member.member_id, {})
        members = {m.member_id: m.subscription for m in group.members.values()}
        members[member.member_id] = sub
        target = self._assignor(members.values()).assign(subs, metadata, group.target)
        for mid, a in target.items():
            if group.target.get(mid) != a or mid not in group.target:
                records.append((encode_key(TARGET_ASSIGNMENT_MEMBER, gid, mid),
                                encode_target_member(a)))
        records.append((encode_key(TARGET_ASSIGNMENT_METADATA, gid), encode_epoch(epoch)))
        log.info("consumer group %s: group epoch %d, target assignment %s", gid, epoch,
                 {m: {str(t): sorted(ps) for t, ps in a.items()} for m, a in target.items()})
        return records, epoch, target[member.member_id]

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._assignor(m.subscription for m in group.members.values()).name

    def _assignor(self, subs: Iterable[MemberSubscription]) -> PartitionAssignor:
        """The assignor most members prefer (Kafka), else the first configured one."""
        names = self._assignors()
        votes: dict[str, int] = {}
        for s in subs:
            if s.server_assignor is not None and s.server_assignor in names:
                votes[s.server_assignor] = votes.get(s.server_assignor, 0) + 1
        name = max(votes, key=lambda n: (votes[n], -names.index(n))) if votes else names[0]
        return ASSIGNORS[name]

    def _subscriptions(self, group: ConsumerGroup,
                       override: Mapping[str, MemberSubscription]) -> dict[str, frozenset[str]]:
        """member id -> topic names it subscribes to now (resolved regexes matched with RE2
        against the non-internal topics that exist)."""
        topics = self.topics()
        subs = {m.member_id: m.subscription for m in group.members.values()}
        subs.update(override)
        out: dict[str, frozenset[str]] = {}
        for mid, s in subs.items():
            names = frozenset(s.subscribed_topic_names)
            if s.subscribed_topic_regex is not None:
                names |= self.regex.matching(group.group_id, s.subscribed_topic_regex, topics)
            out[mid] = names
        return out

    def _subscription_metadata(self, subs: Mapping[str, frozenset[str]]
                               ) -> dict[str, TopicMetadata]:
        topics = self.topics()
        wanted = set().union(*subs.values()) if subs else set()
        return {name: topics[name] for name in sorted(wanted) if name in topics}

    # ------------------------------------------------------------------ leave / fence

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if req.instance_id is not None and group is not None:
            member = group.static_member(req.instance_id)
            if member is not None and member.member_id != req.member_id:
                raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
        if group is None or member is None:
            raise ConsumerGroupError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # a static member leaving for a while: it keeps its partitions (epoch -2) until
            # its session runs out or its next incarnation takes over, and nobody rebalances
            log.info("consumer group %s: static member %s left for now", group.group_id,
                     member.member_id)
            away = MemberAssignment(LEAVE_GROUP_STATIC_MEMBER_EPOCH, member.previous_member_epoch,
                                    int(member.state), member.assigned, {})
            self._write(group.group_id, [
                (encode_key(CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id),
                 encode_current_assignment(away))])
            return HeartbeatResult(ErrorCode.NONE, req.member_id, req.member_epoch)
        log.info("consumer group %s: member %s left", group.group_id, member.member_id)
        self._fence(group, member)
        if self.migration is not None:
            self.migration.maybe_downgrade(group.group_id)
        return HeartbeatResult(ErrorCode.NONE, req.member_id, req.member_epoch)

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Remove the member (its assignment, target and metadata) and bump the group epoch;
        the others get the new target on their next heartbeat."""
        gid, mid = group.group_id, member.member_id
        records: list[Record] = [
            (encode_key(CURRENT_MEMBER_ASSIGNMENT, gid, mid), None),
            (encode_key(TARGET_ASSIGNMENT_MEMBER, gid, mid), None),
            (encode_key(MEMBER_METADATA, gid, mid), None),
        ]
        rest = {m: s for m, s in self._subscriptions(group, {}).items() if m != mid}
        metadata = self._subscription_metadata(rest)
        if metadata != group.subscription_metadata:
            records.append((encode_key(PARTITION_METADATA, gid),
                            encode_partition_metadata(metadata)))
        records.append((encode_key(GROUP_METADATA, gid), encode_epoch(group.group_epoch + 1)))
        member.cancel_timers()
        self._write(gid, records)

    def _fence_later(self, group_id: str, member_id: str, epoch: int | None,
                     why: str) -> Callable[[], None]:
        def run() -> None:
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                return
            if epoch is not None and (member.member_epoch != epoch or
                                      member.state != MemberState.UNREVOKED_PARTITIONS):
                return
            log.info("consumer group %s: member %s fenced: %s", group_id, member_id, why)
            try:
                self._fence(group, member)
                if self.migration is not None and member.subscription.classic is None:
                    self.migration.maybe_downgrade(group_id)
            except OSError:
                log.warning("could not fence member %s of %s", member_id, group_id)
        return run

    def _schedule_timers(self, group_id: str, member: ConsumerGroupMember) -> None:
        if member.session_task is not None:
            member.session_task.cancel()
        classic = member.subscription.classic
        member.session_task = self.scheduler.schedule(
            f"consumer-session-{group_id}-{member.member_id}",
            self._fence_later(group_id, member.member_id, None, "session timeout"),
            classic.session_timeout_ms if classic is not None else
            self.settings.number(group_id, "consumer.session.timeout.ms"))
        if member.state != MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_task is not None:
                member.rebalance_task.cancel()
                member.rebalance_task = None
        elif member.rebalance_task is None or member.rebalance_task.cancelled:
            member.rebalance_task = self.scheduler.schedule(
                f"consumer-rebalance-{group_id}-{member.member_id}",
                self._fence_later(group_id, member.member_id, member.member_epoch,
                                  "did not revoke its partitions in time"),
                max(member.subscription.rebalance_timeout_ms, 0))

    def on_loaded(self, partition: int) -> None:
        """Loaded members get a fresh session: they must heartbeat or be fenced."""
        for group in self.groups.values():
            if self.manager.partition_for(group.group_id) != partition:
                continue
            for member in group.members.values():
                self._schedule_timers(group.group_id, member)

    def shutdown(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                member.cancel_timers()

    def downgrade_if_empty(self, group_id: str) -> ErrorCode:
        """A classic JoinGroup for a consumer group: an empty one becomes classic (its
        records tombstoned, its offsets kept); one with members refuses the join."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self.manager.append_records(group_id, group_tombstones(group_id))
        del self.groups[group_id]
        classic = GroupMetadata(group_id, self.clock.milliseconds())
        classic.offsets = group.offsets
        self.manager.groups[group_id] = classic
        return ErrorCode.NONE

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for a consumer group: only an empty one; its offsets go too."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        records = [(encode_offset_key(group_id, tp.topic, tp.partition), None)
                   for tp in group.offsets]
        self.manager.append_records(group_id, records + group_tombstones(group_id))
        del self.groups[group_id]
        return ErrorCode.NONE

    # ------------------------------------------------------------------ records

    def _write(self, group_id: str, records: list[Record]) -> None:
        """Append first (all or none), then apply: memory never says more than the log."""
        self.manager.append_records(group_id, records)
        for key, value in records:
            replay(self.groups, decode_consumer_key(key), value)


def _check_epoch(member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
    if received > member.member_epoch:
        raise FencedMemberError(
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")
    if received < member.member_epoch and (received != member.previous_member_epoch
                                           or not _is_subset(owned, member.assigned)):
        raise FencedMemberError(
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _changed(member: ConsumerGroupMember, nxt: Reconciled) -> bool:
    return (nxt.member_epoch, nxt.previous_member_epoch, nxt.state, nxt.assigned,
            nxt.pending_revocation) != (member.member_epoch, member.previous_member_epoch,
                                        member.state, member.assigned,
                                        member.pending_revocation)


def _assignment_record(group_id: str, member_id: str, r: Reconciled) -> Record:
    value = MemberAssignment(r.member_epoch, r.previous_member_epoch, int(r.state), r.assigned,
                             r.pending_revocation)
    return (encode_key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
            encode_current_assignment(value))
