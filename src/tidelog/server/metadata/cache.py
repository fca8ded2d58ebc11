"""The broker's metadata cache (Kafka's ZkMetadataCache): the current ``MetadataImage``,
replaced whole on every change. In ZooKeeper mode the UpdateMetadata handler applies the
controller's ``UpdateMetadataDelta``; in one-broker mode the ReplicaManager publishes an image
built from the local store after every topic change. Runs on the event loop."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from tidelog.util.topic_partition import TopicPartition

from .image import (
    EMPTY_IMAGE,
    LEADER_DURING_DELETE,
    BrokerInfo,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)


@dataclass(frozen=True)
class UpdateMetadataDelta:
    """One UpdateMetadata request: the live brokers (all of them: the request carries the
    whole set), the partition states it changes (``leader == LEADER_DURING_DELETE`` removes
    the partition) and the topic ids of the topics it names."""

    controller_id: int
    controller_epoch: int
    brokers: Sequence[BrokerInfo]
    partitions: Mapping[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=dict)


class MetadataCache:
    def __init__(self, image: MetadataImage = EMPTY_IMAGE) -> None:
        self._image = image
        self._listeners: list[Callable[[MetadataImage], object]] = []

    @property
    def image(self) -> MetadataImage:
        return self._image

    def publish(self, image: MetadataImage) -> None:
        """Make ``image`` the current one and tell the listeners."""
        self._image = image
        for fn in list(self._listeners):
            fn(image)

    def add_listener(self, fn: Callable[[MetadataImage], object]) -> None:
        """``fn(image)`` after every publish (waiters for a leader, coordinators)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[MetadataImage], object]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def update_metadata(self, delta: UpdateMetadataDelta) -> list[TopicPartition]:
        """Apply an UpdateMetadata request (the caller fenced its controller epoch); the
        partitions it deleted (Kafka's ZkMetadataCache.updateMetadata)."""
        old = self._image
        parts: dict[str, dict[int, PartitionRegistration]] = {
            name: dict(t.partitions) for name, t in old.topics.items()
        }
        ids = {name: t.topic_id for name, t in old.topics.items()}
        ids.update(delta.topic_ids)
        deleted: list[TopicPartition] = []
        for tp, reg in delta.partitions.items():
            if reg.leader == LEADER_DURING_DELETE:
                if parts.get(tp.topic, {}).pop(tp.partition, None) is not None:
                    deleted.append(tp)
            else:
                parts.setdefault(tp.topic, {})[tp.partition] = reg
        topics = {
            name: TopicImage(name, ids.get(name, uuid.UUID(int=0)), MappingProxyType(p))
            for name, p in parts.items() if p
        }
        self.publish(MetadataImage(
            old.cluster_id, delta.controller_id, delta.controller_epoch,
            MappingProxyType({b.broker_id: b for b in delta.brokers}),
            MappingProxyType(topics),
        ))
        return deleted
