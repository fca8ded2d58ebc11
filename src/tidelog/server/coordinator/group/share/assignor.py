"""Kafka's SimpleAssignor for share groups (KIP-932), sans I/O.

Partitions are spread over the members subscribed to their topics: while there are at least
as many partitions as members, each partition goes to exactly one member and every member
gets its fair share (``partitions // members``, one more for the remainder); only when
members outnumber partitions is a partition shared, each member then getting one. It is
sticky: a member keeps what it had up to its share, so a join or a leave moves only what it
must. Hand-written: no library assigns share-group partitions.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from tidelog.server.coordinator.group.consumer.records import Assignment, TopicMetadata

Slot = tuple[uuid.UUID, int]


def assign(subscriptions: Mapping[str, tuple[str, ...]],
           topics: Mapping[str, TopicMetadata],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """member id -> its partitions (by topic id), from each member's subscribed topic names,
    the topics that exist, and each member's previous assignment."""
    members = sorted(subscriptions)
    eligible: dict[Slot, list[str]] = {}
    for name in sorted({n for names in subscriptions.values() for n in names}):
        meta = topics.get(name)
        if meta is None:
            continue
        who = [m for m in members if name in subscriptions[m]]
        for p in range(meta.num_partitions):
            eligible[(meta.topic_id, p)] = who
    share = {m: 0.0 for m in members}
    for who in eligible.values():
        for m in who:
            share[m] += 1 / len(who)
    owned: dict[str, list[Slot]] = {m: [] for m in members}
    owner: dict[Slot, str] = {}
    _keep_previous(eligible, previous, share, owned, owner)
    for slot in eligible:  # what nobody kept: to the least loaded, its previous owner first
        if slot not in owner:
            had = [m for m in eligible[slot] if slot[1] in previous.get(m, {}).get(slot[0], ())]
            m = min(eligible[slot], key=lambda m: (len(owned[m]), m not in had, m))
            owned[m].append(slot)
            owner[slot] = m
    _share_when_members_outnumber(eligible, previous, owned)
    return {m: _as_assignment(slots) for m, slots in owned.items()}


def _keep_previous(eligible: Mapping[Slot, list[str]], previous: Mapping[str, Assignment],
                   share: Mapping[str, float], owned: dict[str, list[Slot]],
                   owner: dict[Slot, str]) -> None:
    """Stickiness: each member keeps its previous partitions up to the floor of its share,
    then, while the remainder allows, up to its ceiling."""
    floor = {m: math.floor(s + 1e-9) for m, s in share.items()}
    ceil = {m: math.ceil(s - 1e-9) for m, s in share.items()}
    extra = len(eligible) - sum(floor.values())
    for quota, counted in ((floor, False), (ceil, True)):
        for m in sorted(owned):
            for slot in _previous_slots(previous.get(m, {})):
                if len(owned[m]) >= quota[m] or slot in owner or (counted and extra <= 0):
                    continue
                if m not in eligible.get(slot, ()):
                    continue
                extra -= counted
                owned[m].append(slot)
                owner[slot] = m


def _previous_slots(a: Assignment) -> list[Slot]:
    return [(tid, p) for tid in sorted(a, key=str) for p in sorted(a[tid])]


def _share_when_members_outnumber(eligible: Mapping[Slot, list[str]],
                                  previous: Mapping[str, Assignment],
                                  owned: dict[str, list[Slot]]) -> None:
    """A member left without a partition takes one already owned: the one with the fewest
    members (its previous one first)."""
    count = {slot: 0 for slot in eligible}
    for slots in owned.values():
        for slot in slots:
            count[slot] += 1
    for m in sorted(owned):
        if owned[m]:
            continue
        mine = [s for s, who in eligible.items() if m in who]
        if not mine:
            continue
        slot = min(mine, key=lambda s: (count[s], s[1] not in previous.get(m, {}).get(s[0], ()),
                                        str(s[0]), s[1]))
        owned[m].append(slot)
        count[slot] += 1


def _as_assignment(slots: list[Slot]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, p in slots:
        out.setdefault(tid, set()).add(p)
    return {tid: frozenset(ps) for tid, ps in out.items()}
