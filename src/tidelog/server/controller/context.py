"""What the controller knows (Kafka's ControllerContext) and what it tells brokers.

``ControllerContext`` mirrors ZooKeeper: live brokers with their epochs, every topic's id and
replica assignment, every partition's leader/ISR/zkVersion, which brokers are shutting down
and which topics are being deleted. ``RequestBatch`` is Kafka's ControllerBrokerRequestBatch:
the LeaderAndIsr, UpdateMetadata and StopReplica requests one controller step produces,
collected per broker and handed to the ``ControllerChannel`` at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tidelog.server.zk.data import (
    NO_LEADER,
    BrokerRegistration,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from tidelog.util.topic_partition import TopicPartition

# partition states (PartitionStateMachine)
NEW_PARTITION = "NewPartition"
ONLINE_PARTITION = "OnlinePartition"
OFFLINE_PARTITION = "OfflinePartition"
NON_EXISTENT_PARTITION = "NonExistentPartition"

DELETE_REGARDLESS_OF_EPOCH = -2  # StopReplica's leader epoch sentinel (EpochDuringDelete)


@dataclass(frozen=True)
class PartitionStateInfo:
    """One partition as LeaderAndIsr and UpdateMetadata carry it."""

    tp: TopicPartition
    topic_id: uuid.UUID
    state: LeaderIsrAndControllerEpoch
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class LeaderAndIsrRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionStateInfo, ...]
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class UpdateMetadataRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[PartitionStateInfo, ...]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplicaRequestData:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    # tp -> (leader epoch, delete partition)
    partitions: Mapping[TopicPartition, tuple[int, bool]]
    topic_ids: Mapping[str, uuid.UUID]


ControllerRequest = LeaderAndIsrRequestData | UpdateMetadataRequestData | StopReplicaRequestData


@dataclass(frozen=True)
class ControllerResponse:
    """A broker's answer: the top-level error and each partition's (0 = none). A request
    that could not be sent answers with its error code and no partitions."""

    error_code: int
    partition_errors: Mapping[TopicPartition, int] = field(default_factory=dict)


ResponseCallback = Callable[[int, ControllerResponse], None]  # (broker id, response)


class ControllerChannel(Protocol):
    """Kafka's ControllerChannelManager: one ordered queue per broker."""

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send(
        self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None
    ) -> None: ...

    async def close(self) -> None: ...


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    partition_states: dict[TopicPartition, str] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    # replicas whose StopReplica(delete) has not been acknowledged yet, per topic
    replicas_to_delete: dict[str, set[tuple[TopicPartition, int]]] = field(default_factory=dict)
    # per live broker, its replicas on failed log dirs (log_dir_events.py)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    def live_or_shutting_down(self) -> set[int]:
        return set(self.live_brokers) | self.shutting_down_broker_ids

    def live_not_shutting_down(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def broker_epoch(self, broker_id: int) -> int:
        reg = self.live_brokers.get(broker_id)
        return reg.epoch if reg is not None else -1

    def all_topics(self) -> set[str]:
        return set(self.topic_ids)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignments.get(tp)
        return a.replicas if a is not None else ()

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.assignments.items() if broker_id in a.replicas)

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.leadership.items() if s.leader == broker_id)

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """A live broker (shutting down or not), and not a replica on a failed log dir."""
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def online_replicas(self, tp: TopicPartition, *, include_shutting_down: bool = False) -> set[int]:
        """Kafka's ``assignment.filter(isReplicaOnline(_, tp, includeShuttingDownBrokers))``:
        the replicas of ``tp`` every election may choose from, on a live broker (not
        shutting down unless asked) and not on a failed log dir of it."""
        live = self.live_or_shutting_down() if include_shutting_down else self.live_not_shutting_down()
        return {b for b in self.replicas(tp) if b in live and self.is_replica_online(b, tp)}

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(b for b in self.replicas(tp) if not self.is_replica_online(b, tp))

    def remove_topic(self, topic: str) -> None:
        self.topic_ids.pop(topic, None)
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
        self.topics_to_be_deleted.discard(topic)
        self.replicas_to_delete.pop(topic, None)

    def partition_info(self, tp: TopicPartition, *, is_new: bool = False) -> PartitionStateInfo | None:
        state = self.leadership.get(tp)
        a = self.assignments.get(tp)
        if state is None or a is None or tp.topic not in self.topic_ids:
            return None
        if tp.topic in self.topics_to_be_deleted:
            # Kafka tells brokers a deleting topic's leader is LeaderDuringDelete (-2)
            state = LeaderIsrAndControllerEpoch(-2, state.leader_epoch, state.isr,
                                                state.controller_epoch, state.leader_recovery_state,
                                                state.zk_version)  # fmt: skip
        return PartitionStateInfo(
            tp, self.topic_ids[tp.topic], state, a.replicas, a.adding_replicas,
            a.removing_replicas, is_new, self.offline_replicas(tp),
        )  # fmt: skip

    def offline_partition_count(self) -> int:
        return sum(
            1 for tp, s in self.leadership.items()
            if s.leader == NO_LEADER or s.leader not in self.live_brokers
            if tp.topic not in self.topics_to_be_deleted
        )  # fmt: skip


class RequestBatch:
    """Collects one step's requests per broker; ``send_to_brokers`` hands them over."""

    def __init__(self, controller_id: int, context: ControllerContext) -> None:
        self.controller_id = controller_id
        self.context = context
        self.leader_and_isr: dict[int, dict[TopicPartition, PartitionStateInfo]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_partitions: dict[TopicPartition, PartitionStateInfo] = {}
        self.stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = {}
        self.stop_replica_callback: ResponseCallback | None = None
        # every LeaderAndIsr answer goes here (the controller learns offline replicas from it)
        self.leader_and_isr_callback: ResponseCallback | None = None

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, is_new: bool = False
    ) -> None:
        """LeaderAndIsr for ``tp`` to these brokers, and UpdateMetadata about it to all."""
        info = self.context.partition_info(tp, is_new=is_new)
        if info is None:
            return
        for b in broker_ids:
            if b >= 0:
                self.leader_and_isr.setdefault(b, {})[tp] = info
        self.add_update_metadata(self.context.live_or_shutting_down(), [tp])

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for tp in partitions:
            info = self.context.partition_info(tp)
            if info is not None:
                self.update_metadata_partitions[tp] = info

    def add_stop_replica(self, broker_id: int, tp: TopicPartition, *, delete: bool) -> None:
        state = self.context.leadership.get(tp)
        epoch = DELETE_REGARDLESS_OF_EPOCH if delete else (state.leader_epoch if state else -1)
        if tp.topic in self.context.topics_to_be_deleted:
            epoch = DELETE_REGARDLESS_OF_EPOCH
        self.stop_replica.setdefault(broker_id, {})[tp] = (epoch, delete)

    def send_to_brokers(self, channel: ControllerChannel) -> None:
        ctx, cid = self.context, self.controller_id
        live = tuple(ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
        for b, parts in sorted(self.leader_and_isr.items()):
            if b not in ctx.live_brokers:
                continue
            leaders = {p.state.leader for p in parts.values()}
            channel.send(b, LeaderAndIsrRequestData(
                cid, ctx.epoch, ctx.broker_epoch(b), tuple(parts.values()),
                tuple(r for r in live if r.broker_id in leaders),
            ), self.leader_and_isr_callback)  # fmt: skip
        for b in sorted(self.update_metadata_brokers):
            if b in ctx.live_brokers:
                channel.send(b, UpdateMetadataRequestData(
                    cid, ctx.epoch, ctx.broker_epoch(b),
                    tuple(self.update_metadata_partitions.values()), live,
                ))  # fmt: skip
        for b, stops in sorted(self.stop_replica.items()):
            if b in ctx.live_brokers:
                ids = {tp.topic: ctx.topic_ids[tp.topic] for tp in stops if tp.topic in ctx.topic_ids}
                request = StopReplicaRequestData(cid, ctx.epoch, ctx.broker_epoch(b), dict(stops), ids)
                channel.send(b, request, self.stop_replica_callback)
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.stop_replica.clear()
