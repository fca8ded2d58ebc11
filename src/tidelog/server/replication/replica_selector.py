"""Fetch from follower (KIP-392): which replica a consumer should read from.

``replica.selector.class`` names Kafka's selector; the only one Kafka ships,
``org.apache.kafka.common.replica.RackAwareReplicaSelector``, is the one accepted. The leader
runs it for each consumer fetch that carries a ``rack_id`` (Fetch v11+, the consumer's
``client.rack``), over the in-sync replicas whose logs hold the fetch offset plus itself
(Kafka's ReplicaManager.findPreferredReadReplica); a replica other than the leader goes back
in the response as ``preferred_read_replica`` instead of records, and the consumer fetches
from it (a follower serves consumers up to its own high watermark).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.metadata.image import MetadataImage

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Kafka's ReplicaView: a replica's broker (``rack`` None: no rack; ``reachable`` False:
    Kafka's Node.noNode(), no endpoint on the client's listener), its log end offset and how
    long ago it was last caught up with the leader."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int
    reachable: bool = True

    def rank(self) -> tuple[int, int, int]:
        """ReplicaView.comparator(): the larger log end, then the more recently caught up,
        then the larger broker id wins."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, self.broker_id)


class ReplicaSelector(Protocol):
    def select(self, tp: TopicPartition, client_rack: str | None, replicas: Collection[ReplicaView],
               leader: ReplicaView) -> ReplicaView | None: ...  # fmt: skip


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: the leader when the client has no rack, when no
    replica is in its rack, or when the leader is; else the most caught-up replica there."""

    def select(self, tp: TopicPartition, client_rack: str | None, replicas: Collection[ReplicaView],
               leader: ReplicaView) -> ReplicaView | None:  # fmt: skip
        if not client_rack:
            return leader
        same_rack = [r for r in replicas if r.rack == client_rack]
        if not same_rack or leader in same_rack:
            return leader
        return max(same_rack, key=ReplicaView.rank)


def create_replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The configured selector (None: consumers read from leaders only)."""
    if not class_name:
        return None
    if class_name != RACK_AWARE_REPLICA_SELECTOR:
        raise ValueError(f"replica.selector.class {class_name!r} is not a known ReplicaSelector")
    return RackAwareReplicaSelector()


class FollowerState(Protocol):
    @property
    def broker_id(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_caught_up_time_ms(self) -> int: ...


class LeaderState(Protocol):
    """What the leader's Partition tells the selector."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def local_broker_id(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def isr(self) -> frozenset[int]: ...

    @property
    def remote_replicas(self) -> Mapping[int, FollowerState]: ...


def find_preferred_read_replica(
    selector: ReplicaSelector,
    partition: LeaderState,
    client_rack: str | None,
    fetch_offset: int,
    now_ms: int,
    racks: Mapping[int, str | None],
) -> int | None:
    """Kafka's findPreferredReadReplica on the leader: candidates are the ISR followers whose
    logs hold ``fetch_offset``, and the leader; ``racks`` maps each broker reachable on the
    client's listener to its rack. None when the choice is the leader (or unreachable), or
    this broker does not lead."""
    if not partition.is_leader:
        return None
    candidates: list[ReplicaView] = [
        ReplicaView(f.broker_id, racks.get(f.broker_id), f.log_end_offset,
                    now_ms - f.last_caught_up_time_ms, f.broker_id in racks)
        for f in partition.remote_replicas.values()
        if f.broker_id in partition.isr and f.log_start_offset <= fetch_offset <= f.log_end_offset
    ]  # fmt: skip
    me = partition.local_broker_id
    leader = ReplicaView(me, racks.get(me), partition.log_end_offset, 0, me in racks)
    chosen = selector.select(partition.topic_partition, client_rack, [*candidates, leader], leader)
    if chosen is None or chosen == leader or not chosen.reachable:
        return None
    return chosen.broker_id


def preferred_read_replica(
    class_name: str | None,
    partition: LeaderState,
    client_rack: str | None,
    fetch_offset: int,
    now_ms: int,
    image: MetadataImage,
    listener_name: str,
) -> int:
    """For a consumer's fetch (v11+) of ``partition``: the replica it should read from
    instead of this leader, by the configured ``replica.selector.class``; -1 (the wire's
    none) to read here."""
    selector = _selector(class_name)
    if selector is None:
        return NO_PREFERRED_REPLICA
    racks = {b.broker_id: b.rack for b in image.brokers.values()
             if b.endpoint(listener_name) is not None}  # fmt: skip
    found = find_preferred_read_replica(selector, partition, client_rack, fetch_offset, now_ms, racks)
    return NO_PREFERRED_REPLICA if found is None else found


@functools.cache
def _selector(class_name: str | None) -> ReplicaSelector | None:
    return create_replica_selector(class_name)
