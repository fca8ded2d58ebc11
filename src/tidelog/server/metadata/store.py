"""The metadata store: the durable home of topics (id, partition count and assignment,
config overrides), the cluster id and producer-id blocks. ``local_store.py`` keeps them in a
JSON file for a one-broker cluster; the ZooKeeper store keeps them in Kafka's znodes.

Every write is durable when the call returns (or raises with nothing changed); the store's
``topics`` view is read on the event loop."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class MetadataStoreError(Exception):
    pass


@dataclass(frozen=True)
class TopicInfo:
    """A topic as the store keeps it. ``assignment`` maps a partition to its replicas in
    order (the first is the preferred leader); empty: every partition on this broker alone
    (a one-broker cluster)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def replicas(self, partition: int, local_broker: int) -> tuple[int, ...]:
        return self.assignment.get(partition, (local_broker,))

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.configs),
        }


class MetadataStore(Protocol):
    @property
    def cluster_id(self) -> str: ...

    @property
    def topics(self) -> Mapping[str, TopicInfo]: ...

    def load(self) -> bool:
        """Read (or initialise) the store; True when it held metadata already, so a log no
        topic owns is a stray."""
        ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def create_topic(self, info: TopicInfo) -> None: ...

    def delete_topic(self, name: str) -> None: ...

    def update_topic(self, info: TopicInfo) -> None:
        """Replace a topic's partition count, assignment or configs (same name and id)."""
        ...

    def claim_producer_id_block(self, size: int) -> int:
        """Reserve ``size`` producer ids durably; the first of them (Kafka's
        ``/latest_producer_id_block``)."""
        ...


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_topic_id() -> uuid.UUID:
    """Kafka's Uuid.randomUuid(): never the zero/metadata ids, never a string starting '-'."""
    while True:
        u = uuid.uuid4()
        if u.int > 1 and not uuid_to_kafka(u).startswith("-"):
            return u
