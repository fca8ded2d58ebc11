"""Kafka's CurrentAssignmentBuilder: one member's next assignment on its way to the target.

A partition the member must give up stays in ``pending_revocation`` (and the member in its
epoch, state UNREVOKED_PARTITIONS) until its heartbeat no longer reports it owned; a
partition another member still holds is withheld (UNRELEASED_PARTITIONS) until that member
has let it go. So no partition is ever owned by two members at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tidelog.server.coordinator.group.consumer.group import ConsumerGroupMember, MemberState
from tidelog.server.coordinator.group.consumer.records import Assignment

PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMemberError(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


@dataclass(frozen=True, slots=True)
class Reconciled:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              owned: Assignment | None, partition_epoch: PartitionEpoch) -> Reconciled:
    """``owned`` is what the heartbeat reports (None: not sent); ``partition_epoch`` gives
    the epoch of the member holding a partition, -1 when it is free."""
    current = Reconciled(member.member_epoch, member.previous_member_epoch, member.state,
                         member.assigned, member.pending_revocation)
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return current
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return current
        return _next(member, member.member_epoch + 1, target_epoch, target, owned,
                     partition_epoch)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if owned is None or any(owned.values()):
        raise FencedMemberError("The consumer group member is in an unknown state.")
    return _next(member, target_epoch, target_epoch, target, owned, partition_epoch)


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Assignment,
          owned: Assignment | None, partition_epoch: PartitionEpoch) -> Reconciled:
    unreleased = False
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: Assignment = {}
    pending: dict[uuid.UUID, set[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, frozenset())
        have = member.assigned.get(topic_id, frozenset())
        keep = have & want
        gone = have - keep
        new = {p for p in want - keep if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(new) < len(want - keep)
        if keep:
            assigned[topic_id] = set(keep)
        if gone:
            revoking[topic_id] = frozenset(gone)
        if new:
            pending[topic_id] = new
    previous = member.member_epoch
    if revoking and _owns_any(owned, revoking):
        return Reconciled(epoch, previous if epoch != previous else member.previous_member_epoch,
                          MemberState.UNREVOKED_PARTITIONS, _freeze(assigned), revoking)
    for topic_id, ps in pending.items():
        assigned.setdefault(topic_id, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(target_epoch,
                      previous if target_epoch != previous else member.previous_member_epoch,
                      state, _freeze(assigned), {})


def _freeze(a: dict[uuid.UUID, set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}
