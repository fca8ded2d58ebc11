"""Cluster metadata that must survive restarts: topics (id, partition count, config
overrides), the cluster id and the producer-id block.

Kafka keeps this in the KRaft ``__cluster_metadata`` log; a single-node tidelog keeps it in
``<first log dir>/tidelog-metadata.json`` (written tmp + fsync + rename + dir fsync, so a
crash leaves the old or the new file, never a torn one) and writes Kafka's
``meta.properties`` into every log dir.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .meta_properties import MetaPropertiesError, verify_meta_properties

METADATA_FILE = "tidelog-metadata.json"
META_PROPERTIES = "meta.properties"


class MetadataStoreError(Exception):
    pass


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.configs),
        }


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def new_topic_id() -> uuid.UUID:
    """Kafka's Uuid.randomUuid(): never the zero/metadata ids, never a string starting '-'."""
    while True:
        u = uuid.uuid4()
        if u.int > 1 and not uuid_to_kafka(u).startswith("-"):
            return u


def _new_cluster_id() -> str:
    return uuid_to_kafka(new_topic_id())


PARTITION_METADATA = "partition.metadata"


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """Kafka's ``partition.metadata`` (version 0 + the topic id); a file naming another id
    is left alone and reported (Kafka's InconsistentTopicIdException)."""
    path = partition_dir / PARTITION_METADATA
    text = f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n"
    if path.exists():
        current = path.read_text(errors="replace")
        if current != text:
            raise MetadataStoreError(
                f"{path}: topic id in the file ({current.strip()!r}) differs from the "
                f"topic's id {uuid_to_kafka(topic_id)}"
            )
        return
    atomic_write(path, text.encode())


class MetadataStore:
    def __init__(self, log_dirs: list[Path], node_id: int, cluster_id: str | None = None) -> None:
        self.log_dirs = log_dirs
        self.node_id = node_id
        self.path = log_dirs[0] / METADATA_FILE
        self.topics: dict[str, TopicInfo] = {}
        self.next_producer_id = 0
        self.cluster_id = cluster_id or ""

    def load(self) -> None:
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
                    self.topics[name] = TopicInfo(
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
            self.save()

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

    def save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "topics": {n: t.to_json() for n, t in sorted(self.topics.items())},
        }
        atomic_write(self.path, json.dumps(doc, indent=1).encode())

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None
