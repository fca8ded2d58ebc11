"""The metadata image: what the broker knows of the cluster at one moment (Kafka's
MetadataCache contents in ZooKeeper mode), frozen. Handlers read ``MetadataCache.image``
once per request; a change makes a new image, never mutates one.

``leader == -1`` (``NO_LEADER``) is an offline partition; replicas, ISR and the other
replica lists are tuples of broker ids in assignment order."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from tidelog.util.topic_partition import TopicPartition

NO_LEADER = -1
# Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata's mark of a partition being deleted
LEADER_DURING_DELETE = -2
_EMPTY: Mapping[int, PartitionRegistration] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker: its endpoints by listener name, its rack, its epoch (the czxid of its
    ``/brokers/ids/<id>`` znode in ZooKeeper mode; 0 for a one-broker cluster)."""

    broker_id: int
    endpoints: Mapping[str, tuple[str, int]]
    rack: str | None = None
    epoch: int = 0

    def endpoint(self, listener_name: str) -> tuple[str, int] | None:
        return self.endpoints.get(listener_name)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """A partition's state as the controller registered it (Kafka's
    UpdateMetadataPartitionState / PartitionRegistration)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0

    @property
    def online(self) -> bool:
        return self.leader >= 0


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY)

    def partition(self, partition: int) -> PartitionRegistration | None:
        return self.partitions.get(partition)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str
    controller_id: int  # -1: no controller known
    controller_epoch: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicImage]
    _by_id: Mapping[uuid.UUID, TopicImage] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {t.topic_id: t for t in self.topics.values()}
        object.__setattr__(self, "_by_id", MappingProxyType(by_id))

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self._by_id.get(topic_id)

    def partition(self, tp: TopicPartition) -> PartitionRegistration | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)


EMPTY_IMAGE = MetadataImage("", -1, -1, MappingProxyType({}), MappingProxyType({}))

