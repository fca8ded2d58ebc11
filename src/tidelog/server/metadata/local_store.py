"""The one-broker metadata store: topics (id, partition count, config overrides), the cluster
id and the producer-id block in ``<first log dir>/tidelog-metadata.json`` (written tmp + fsync
+ rename + dir fsync, so a crash leaves the old or the new file, never a torn one), and
Kafka's ``meta.properties`` in every log dir.

Kafka keeps this in ZooKeeper (or the KRaft ``__cluster_metadata`` log); a one-broker tidelog
keeps it here. Every write is durable when the call returns, or raises with nothing changed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Collection, Mapping
from concurrent.futures import Executor
from pathlib import Path
from types import MappingProxyType

from tidelog.util.files import atomic_write
from tidelog.util.topic_partition import TopicPartition

from ..meta_properties import MetaPropertiesError, verify_meta_properties
from .image import NO_LEADER, BrokerInfo, MetadataImage, PartitionRegistration, TopicImage
from .store import MetadataStore, MetadataStoreError, TopicInfo, new_topic_id, uuid_to_kafka

log = logging.getLogger(__name__)

METADATA_FILE = "tidelog-metadata.json"
META_PROPERTIES = "meta.properties"


def _new_cluster_id() -> str:
    return uuid_to_kafka(new_topic_id())


PARTITION_METADATA = "partition.metadata"


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """Kafka's ``partition.metadata`` (version 0 + the topic id); a file naming another id
    is left alone and reported (Kafka's InconsistentTopicIdException)."""
    if partition_metadata_missing(partition_dir, topic_id):
        atomic_write(partition_dir / PARTITION_METADATA, _partition_metadata(topic_id).encode())


def write_partition_metadata_later(executor: Executor, partition_dir: Path,
                                   topic_id: uuid.UUID) -> None:
    """The write of ``write_partition_metadata`` (two fsyncs), its check already made
    (``partition_metadata_missing``), on ``executor``, not in the LeaderAndIsr that every
    request of the broker, and the UpdateMetadata queued behind it, waits for; Kafka flushes
    it on its scheduler too. A crash before leaves none: the next LeaderAndIsr names the id
    again."""
    text = _partition_metadata(topic_id).encode()

    def write() -> None:
        try:
            atomic_write(partition_dir / PARTITION_METADATA, text)
        except OSError as e:  # the log was moved or deleted since
            log.info("partition.metadata of %s not written: %s", partition_dir.name, e)

    executor.submit(write)


def partition_metadata_missing(partition_dir: Path, topic_id: uuid.UUID) -> bool:
    """Whether ``partition.metadata`` is still to be written (a read, no write); one naming
    another id raises MetadataStoreError."""
    path = partition_dir / PARTITION_METADATA
    if not path.exists():
        return True
    current, text = path.read_text(errors="replace"), _partition_metadata(topic_id)
    if current != text:
        raise MetadataStoreError(
            f"{path}: topic id in the file ({current.strip()!r}) differs from the "
            f"topic's id {uuid_to_kafka(topic_id)}"
        )
    return False


def _partition_metadata(topic_id: uuid.UUID) -> str:
    return f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n"


class LocalMetadataStore:
    def __init__(self, log_dirs: list[Path], node_id: int, cluster_id: str | None = None) -> None:
        self.log_dirs = log_dirs
        self.node_id = node_id
        self.path = log_dirs[0] / METADATA_FILE
        self._topics: dict[str, TopicInfo] = {}
        self.next_producer_id = 0
        self.cluster_id = cluster_id or ""

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._topics

    def load(self) -> bool:
        had_metadata = self.path.exists()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        try:  # another cluster's or node's dir, or a garbage file: stop, as Kafka does
            found = verify_meta_properties(self.log_dirs, self.node_id, self.cluster_id)
        except MetaPropertiesError as exc:
            raise MetadataStoreError(str(exc)) from None
        self.cluster_id = self.cluster_id or found
        if self.path.exists():
            try:
                doc = json.loads(self.path.read_bytes())
                stored = doc.get("cluster_id", "")
                if self.cluster_id and stored and self.cluster_id != stored:
                    raise MetadataStoreError(
                        f"The Cluster ID {self.cluster_id} doesn't match stored clusterId "
                        f"{stored} in {self.path}"
                    )
                self.cluster_id = self.cluster_id or stored
                self.next_producer_id = int(doc.get("next_producer_id", 0))
                for name, t in doc.get("topics", {}).items():
                    self._topics[name] = TopicInfo(
                        name,
                        uuid.UUID(t["topic_id"]),
                        int(t["partitions"]),
                        dict(t.get("configs", {})),
                    )
            except MetadataStoreError:
                raise
            except (ValueError, KeyError, TypeError) as exc:
                raise MetadataStoreError(f"{self.path}: unreadable metadata file: {exc}") from exc
        existed = self.path.exists()
        if not self.cluster_id:
            self.cluster_id = _new_cluster_id()
        self._write_meta_properties()
        if not existed:
            self._save()
        return had_metadata

    def _write_meta_properties(self) -> None:
        for d in self.log_dirs:
            p = d / META_PROPERTIES
            if p.exists():
                continue
            text = (
                f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n"
                f"cluster.id={self.cluster_id}\ndirectory.id={_new_cluster_id()}\n"
                f"node.id={self.node_id}\nversion=1\n"
            )
            atomic_write(p, text.encode())

    def _save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "topics": {n: t.to_json() for n, t in sorted(self.topics.items())},
        }
        atomic_write(self.path, json.dumps(doc, indent=1).encode())

    def _commit(self, topics: dict[str, TopicInfo], next_producer_id: int) -> None:
        """Write the new state; adopt it only once it is on disk."""
        old = self._topics, self.next_producer_id
        self._topics, self.next_producer_id = topics, next_producer_id
        try:
            self._save()
        except BaseException:
            self._topics, self.next_producer_id = old
            raise

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self._topics.values():
            if t.topic_id == topic_id:
                return t
        return None

    def create_topic(self, info: TopicInfo) -> None:
        if info.name in self._topics:
            raise MetadataStoreError(f"topic {info.name} exists")
        self._commit({**self._topics, info.name: info}, self.next_producer_id)

    def delete_topic(self, name: str) -> None:
        topics = dict(self._topics)
        if topics.pop(name, None) is not None:
            self._commit(topics, self.next_producer_id)

    def update_topic(self, info: TopicInfo) -> None:
        current = self._topics.get(info.name)
        if current is None or current.topic_id != info.topic_id:
            raise MetadataStoreError(f"topic {info.name} ({uuid_to_kafka(info.topic_id)}) "
                                     "does not exist")
        self._commit({**self._topics, info.name: dataclasses.replace(info)},
                     self.next_producer_id)

    def claim_producer_id_block(self, size: int) -> int:
        start = self.next_producer_id
        self._commit(self._topics, start + size)
        return start


def local_image(store: MetadataStore, broker: BrokerInfo,
                offline: Collection[TopicPartition] = (),
                leader_epochs: Mapping[TopicPartition, int] | None = None) -> MetadataImage:
    """A one-broker cluster's image: this broker is the controller, every partition's only
    replica and leader with ISR [self] at its leader epoch; a partition whose log dir failed
    is offline (no leader, its replica listed offline), as Kafka's controller reports it."""
    node = broker.broker_id
    epochs = leader_epochs or {}
    regs: dict[int, PartitionRegistration] = {}  # one object per epoch, shared

    def registration(tp: TopicPartition) -> PartitionRegistration:
        epoch = epochs.get(tp, 0)
        if tp in offline:
            return PartitionRegistration((node,), (), NO_LEADER, epoch, 0,
                                         offline_replicas=(node,))
        reg = regs.get(epoch)
        if reg is None:
            reg = regs[epoch] = PartitionRegistration((node,), (node,), node, epoch, 0)
        return reg

    topics = {}
    for info in list(store.topics.values()):
        parts = {p: registration(TopicPartition(info.name, p)) for p in range(info.partitions)}
        topics[info.name] = TopicImage(info.name, info.topic_id, MappingProxyType(parts))
    return MetadataImage(store.cluster_id, node, 0, MappingProxyType({node: broker}),
                         MappingProxyType(topics))
