"""Kafka's GroupCoordinator for the classic protocol: the public face of this package.

``RebalanceCore`` (rebalance.py) holds lifecycle, JoinGroup and the timers; ``OffsetsApi``
(offsets.py) the offset APIs; this module adds SyncGroup, Heartbeat, LeaveGroup and the
admin APIs (ListGroups, DescribeGroups, DeleteGroups).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.consumer.group import CONSUMER_GROUP_TYPE
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.member import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    JoinRequest,
    SyncCallback,
    SyncRequest,
    SyncResult,
)
from tidelog.server.coordinator.group.offsets import CommitEntry, FetchedOffset, OffsetsApi
from tidelog.server.coordinator.group.share.coordinator import SHARE_GROUP_TYPE

__all__ = [
    "NO_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "CommitEntry",
    "FetchedOffset",
    "GroupCoordinator",
    "GroupOverview",
    "GroupSummary",
    "JoinRequest",
    "MemberSummary",
    "SyncRequest",
]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberSummary] = field(default_factory=list)


class GroupCoordinator(OffsetsApi):
    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, req: SyncRequest, callback: SyncCallback) -> None:
        err = self.group_error(req.group_id)
        if err == ErrorCode.NONE and req.group_id in self.consumer.groups:
            callback(self.migration.sync(req))  # a classic member of a consumer group
            return
        group = self.groups.get(req.group_id) if err == ErrorCode.NONE else None
        if err == ErrorCode.NONE:
            err = self._validate_sync(group, req)
        if err != ErrorCode.NONE:
            callback(SyncResult(err))
            return
        assert group is not None
        member = group.members[req.member_id]
        group.pending_sync.discard(req.member_id)
        self._complete_and_schedule_heartbeat(group, member)
        if group.is_state(GroupState.STABLE):
            callback(
                SyncResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )
            return
        member.awaiting_sync = callback
        if group.is_leader(req.member_id):
            self._apply_leader_assignment(group, req.assignments)

    def _validate_sync(self, group: GroupMetadata | None, req: SyncRequest) -> ErrorCode:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(req.group_instance_id, req.member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if req.member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _apply_leader_assignment(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        for member_id, member in group.members.items():
            member.assignment = bytes(assignments.get(member_id, b""))
        try:
            self.manager.store_group(group)
        except OSError:
            self._reset_and_propagate_assignment_error(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._maybe_prepare_rebalance(group, "failed to store the group's assignment")
            return
        group.transition_to(GroupState.STABLE, self.now())
        for member in group.members.values():
            member.complete_sync(
                SyncResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                )
            )

    def assignment_not_replicated(self, group_id: str, generation_id: int) -> None:
        """The write of a generation's assignment was not replicated: as Kafka's storeGroup
        callback does on an error, the assignment goes and the group rebalances (unless it
        moved on meanwhile)."""
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.is_state(GroupState.STABLE) or group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self._maybe_prepare_rebalance(group, "the group's assignment was not replicated")

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        err = self.group_error(group_id)
        if err != ErrorCode.NONE:
            return err
        if group_id in self.consumer.groups:  # a classic member of a consumer group
            return self.migration.heartbeat(group_id, member_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_heartbeat(group, member)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members as (member_id, group_instance_id); returns the top-level error and one
        error per member (LeaveGroup v3+ batches members, KIP-345)."""
        err = self.group_error(group_id)
        if err != ErrorCode.NONE:
            return err, [err] * len(members)
        if group_id in self.consumer.groups:  # classic members of a consumer group
            return self.migration.leave(group_id, members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(
                members
            )
        return ErrorCode.NONE, [self._leave_one(group, m, i) for m, i in members]

    def _leave_one(
        self, group: GroupMetadata, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id != UNKNOWN_MEMBER_ID and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        elif member_id in group.pending_members:
            task = group.pending_members.pop(member_id)
            if task is not None:
                task.cancel()
            self._try_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member_and_update_group(group, member, "the consumer is leaving the group")
        return ErrorCode.NONE

    # ------------------------------------------------------------------ admin

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """Every group; filters by state names (case-insensitive) and group type."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.partitions.loading else ErrorCode.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        everything = [
            *(GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
              for g in self.groups.values()),
            *(GroupOverview(g.group_id, CONSUMER_GROUP_TYPE, g.state().value, CONSUMER_GROUP_TYPE)
              for g in self.consumer.groups.values()),
            *(GroupOverview(g.group_id, SHARE_GROUP_TYPE, g.state(), SHARE_GROUP_TYPE)
              for g in self.share.groups.values()),
        ]
        out = [
            o for o in everything
            if (not wanted_states or o.state.lower() in wanted_states)
            and (not wanted_types or o.group_type in wanted_types)
        ]
        return error, sorted(out, key=lambda o: o.group_id)

    def describe_group(self, group_id: str) -> GroupSummary:
        err = self.group_error(group_id, allow_empty=True)
        if err != ErrorCode.NONE:
            return GroupSummary(err, group_id, GroupState.DEAD.value)
        if group_id in self.consumer.groups or group_id in self.share.groups:
            # Kafka: not a classic group, so "not found"
            return GroupSummary(ErrorCode.GROUP_ID_NOT_FOUND, group_id, GroupState.DEAD.value)
        group = self.groups.get(group_id)
        if group is None:
            return GroupSummary(ErrorCode.NONE, group_id, GroupState.DEAD.value)
        stable = group.is_state(GroupState.STABLE)
        members = [
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupSummary(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            err = self.group_error(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if err != ErrorCode.NONE:
                out[group_id] = err
            elif group_id in self.share.groups:
                out[group_id] = self.share.delete_group(group_id)
            elif group_id in self.consumer.groups:
                try:
                    out[group_id] = self.consumer.delete_group(group_id)
                except OSError:
                    out[group_id] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif group is None or group.is_state(GroupState.DEAD):
                out[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_state(GroupState.EMPTY):
                out[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                try:
                    self.manager.delete_group(group)
                    out[group_id] = ErrorCode.NONE
                except OSError:
                    out[group_id] = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return out
