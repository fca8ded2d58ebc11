"""Server-side assignors of KIP-848 (``group.consumer.assignors``: ``uniform``, ``range``).

Both are pure functions of the members' subscriptions, the subscribed topics' metadata and
the previous target assignment, like Kafka's ``ConsumerGroupPartitionAssignor``s.

``uniform`` (Kafka's UniformAssignor) balances partitions so that members' counts differ by
at most one among the members that could take them, and is sticky: a member keeps what it
had as long as it stays within its share, so a joining member takes partitions only from
the members above their new share. ``range`` (Kafka's RangeAssignor) gives each member a
contiguous range of every topic it subscribes to, members in id order.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

from tidelog.server.coordinator.group.consumer.records import Assignment, TopicMetadata

Slot = tuple[uuid.UUID, int]


class PartitionAssignor(Protocol):
    name: str

    def assign(self, subscriptions: Mapping[str, frozenset[str]],
               topics: Mapping[str, TopicMetadata],
               previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
        """member id -> subscribed topic names; topic name -> metadata; member id -> its
        previous target. Returns the new target of every member (possibly empty)."""
        ...


def _pack(owned: Mapping[str, set[Slot]], members: Mapping[str, object]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member_id in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, p in owned.get(member_id, ()):
            by_topic.setdefault(topic_id, set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


class UniformAssignor:
    name = "uniform"

    def assign(self, subscriptions: Mapping[str, frozenset[str]],
               topics: Mapping[str, TopicMetadata],
               previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        eligible: dict[Slot, list[str]] = {}
        for name in sorted(topics):
            t = topics[name]
            takers = [m for m in members if name in subscriptions[m]]
            if takers:
                for p in range(t.num_partitions):
                    eligible[(t.topic_id, p)] = takers
        owned: dict[str, set[Slot]] = {m: set() for m in members}
        cap = {m: _share(m, eligible) for m in members}
        for m in members:  # sticky: keep what is still valid, up to the member's share
            for topic_id, parts in sorted(previous.get(m, {}).items(), key=lambda kv: str(kv[0])):
                for p in sorted(parts):
                    slot = (topic_id, p)
                    if m in eligible.get(slot, ()) and len(owned[m]) < cap[m] and not any(
                            slot in o for o in owned.values()):
                        owned[m].add(slot)
        taken = {s for o in owned.values() for s in o}
        for slot in eligible:  # the rest to the least loaded member that may take it
            if slot not in taken:
                m = min(eligible[slot], key=lambda x: (len(owned[x]), x))
                owned[m].add(slot)
        _balance(owned, eligible)
        return _pack(owned, subscriptions)


def _share(member: str, eligible: Mapping[Slot, list[str]]) -> int:
    """Ceil of the member's fair share over the partitions it may take."""
    mine = [takers for takers in eligible.values() if member in takers]
    if not mine:
        return 0
    peers = max(len(t) for t in mine)
    return -(-len(mine) // peers)


def _balance(owned: dict[str, set[Slot]], eligible: Mapping[Slot, list[str]]) -> None:
    """Move one partition at a time from the most to the least loaded member that may take
    it, until no move narrows a gap of two or more."""
    while True:
        moved = False
        for hi in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for slot in sorted(owned[hi], key=lambda s: (str(s[0]), -s[1])):
                lo = min(eligible[slot], key=lambda x: (len(owned[x]), x))
                if len(owned[hi]) - len(owned[lo]) >= 2:
                    owned[hi].discard(slot)
                    owned[lo].add(slot)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


class RangeAssignor:
    name = "range"

    def assign(self, subscriptions: Mapping[str, frozenset[str]],
               topics: Mapping[str, TopicMetadata],
               previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
        owned: dict[str, set[Slot]] = {m: set() for m in subscriptions}
        for name in sorted(topics):
            t = topics[name]
            takers = sorted(m for m in subscriptions if name in subscriptions[m])
            if not takers:
                continue
            per, extra = divmod(t.num_partitions, len(takers))
            start = 0
            for i, m in enumerate(takers):
                n = per + (1 if i < extra else 0)
                owned[m].update((t.topic_id, p) for p in range(start, start + n))
                start += n
        return _pack(owned, subscriptions)


ASSIGNORS: dict[str, PartitionAssignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
