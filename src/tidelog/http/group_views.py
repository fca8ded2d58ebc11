"""Read-only views of every kind of group for /metrics and the console: classic groups,
KIP-848 consumer groups and KIP-932 share groups, their members and assignments, and each
share-partition's in-flight records (states, acquisition locks).

Like state.py, everything here runs on the event loop and writes nothing.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.server.coordinator.group.share.partition import RecordState, SharePartition

if TYPE_CHECKING:
    from tidelog.server.broker import Broker
    from tidelog.server.coordinator.group.coordinator import GroupCoordinator

CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


@dataclass
class MemberView:
    member_id: str
    client_id: str
    client_host: str
    partitions: list[tuple[str, int]]  # its assignment (classic: decoded when it can be)
    assignment_bytes: int = 0  # a classic member's assignment that is no consumer protocol

    @property
    def assignment(self) -> str:
        if not self.partitions and self.assignment_bytes:
            return f"{self.assignment_bytes} bytes"
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(p)
        return "; ".join(f"{t}: {', '.join(map(str, ps))}" for t, ps in by_topic.items()) or (
            "(nothing)")


@dataclass
class GroupView:
    group_id: str
    type: str
    state: str
    protocol: str  # classic: the protocol type and assignor; consumer/share: the assignor
    epoch: int  # classic: the generation; consumer/share: the group epoch
    members: list[MemberView] = field(default_factory=list)


@dataclass
class SharePartitionView:
    group_id: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    in_flight: int  # records in [start, end) not yet acknowledged or archived
    available: int
    acquired: int
    acknowledged: int
    archived: int
    oldest_lock_age_ms: int  # the longest-held acquisition lock (0: none held)
    lock_duration_ms: int


def coordinator(broker: Broker) -> GroupCoordinator | None:
    return broker.group_coordinator


def _topic_names(broker: Broker) -> dict[uuid.UUID, str]:
    return {i.topic_id: i.name for i in broker.replica_manager.topics()
            if i.topic_id is not None}


def decode_consumer_assignment(data: bytes) -> list[tuple[str, int]] | None:
    """A classic ConsumerProtocolAssignment's partitions (None: not that protocol)."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: list[tuple[str, int]] = []
        for _ in range(max(count, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2: pos + 2 + n].decode("utf-8")
            pos += 2 + n
            (k,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out += [(topic, p) for p in struct.unpack_from(f">{max(k, 0)}i", data, pos)]
            pos += 4 * max(k, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def _by_id(assigned: dict[uuid.UUID, frozenset[int]],
           names: dict[uuid.UUID, str]) -> list[tuple[str, int]]:
    return sorted((names.get(tid, str(tid)), p) for tid, ps in assigned.items() for p in ps)


def group_views(broker: Broker) -> list[GroupView]:
    """Every group this broker coordinates, of every type, in group id order."""
    coord = coordinator(broker)
    if coord is None:
        return []
    names = _topic_names(broker)
    out: list[GroupView] = []
    for gid, g in coord.groups.items():
        members = []
        for m in g.members.values():
            parts = decode_consumer_assignment(m.assignment) if m.assignment else []
            members.append(MemberView(m.member_id, m.client_id, m.client_host, parts or [],
                                      0 if parts is not None else len(m.assignment)))
        protocol = "/".join(x for x in (g.protocol_type, g.protocol_name) if x)
        out.append(GroupView(gid, CLASSIC, g.state.value, protocol, g.generation_id, members))
    for gid, cg in coord.consumer.groups.items():
        cmembers = [MemberView(m.member_id, m.subscription.client_id,
                               m.subscription.client_host, _by_id(m.assigned, names))
                    for m in cg.members.values()]
        assignor = next((m.subscription.server_assignor for m in cg.members.values()
                         if m.subscription.server_assignor), None) or ""
        out.append(GroupView(gid, CONSUMER, cg.state().value, assignor, cg.group_epoch,
                             cmembers))
    for gid, sg in coord.share.groups.items():
        smembers = [MemberView(m.member_id, m.client_id, m.client_host, _by_id(m.assigned, names))
                    for m in sg.members.values()]
        out.append(GroupView(gid, SHARE, sg.state(), "simple", sg.group_epoch, smembers))
    return sorted(out, key=lambda v: v.group_id)


def share_partition_view(group_id: str, topic: str, partition: int, sp: SharePartition,
                         now_ms: int) -> SharePartitionView:
    counts = dict.fromkeys(RecordState, 0)
    oldest = 0
    for off, rec in sp.records.items():
        if sp.start_offset <= off < sp.end_offset:
            counts[rec.state] += 1
        if rec.state == RecordState.ACQUIRED and rec.lock is not None and rec.lock.next_ms:
            oldest = max(oldest, now_ms - (rec.lock.next_ms - sp.lock_ms))
    # offsets in [start, end) with no entry were delivered as part of nothing: available
    tracked = sum(counts.values())
    available = counts[RecordState.AVAILABLE] + max(0, sp.end_offset - sp.start_offset - tracked)
    return SharePartitionView(
        group_id, topic, partition, sp.start_offset, sp.end_offset,
        in_flight=available + counts[RecordState.ACQUIRED], available=available,
        acquired=counts[RecordState.ACQUIRED], acknowledged=counts[RecordState.ACKNOWLEDGED],
        archived=counts[RecordState.ARCHIVED], oldest_lock_age_ms=max(oldest, 0),
        lock_duration_ms=sp.lock_ms)


def share_partition_views(broker: Broker, group_id: str | None = None
                          ) -> list[SharePartitionView]:
    coord = coordinator(broker)
    if coord is None:
        return []
    now = broker.clock.milliseconds()
    out = []
    for (gid, tp), sp in coord.share.partitions.items():
        if group_id is None or gid == group_id:
            out.append(share_partition_view(gid, tp.topic, tp.partition, sp, now))
    return sorted(out, key=lambda v: (v.group_id, v.topic, v.partition))
