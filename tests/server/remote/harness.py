"""A tiered broker's replica manager in-process: a ManualClock, a directory as remote
storage (FileSystemStorage, Aiven's backend names), the __remote_log_metadata manager over
the broker's own replicated append path, and a RemoteLogManager whose passes the tests run
one at a time (nothing scheduled, nothing slept)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC, RemoteLogManagerConfig
from tidelog.records import RecordBatchBuilder
from tidelog.server.coordinator.partition_writer import PartitionWriter
from tidelog.server.remote_log_manager import RemoteLogManager, TieredPartition
from tidelog.server.remote_log_metadata_manager import TopicBasedRemoteLogMetadataManager
from tidelog.server.replica_manager import ReplicaManager
from tidelog.storage.log import Log
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.index_cache import RemoteIndexCache
from tidelog.storage.remote.storage_manager import RemoteStorageManager
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

TOPIC = "tiered"
FS_BACKEND = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
START_MS = 1_700_000_000_000


def broker_props(log_dir: Path, remote_root: Path, **extra: str) -> dict[str, str]:
    return {
        "log.dirs": str(log_dir),
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class": FS_BACKEND,
        "rsm.config.storage.root": str(remote_root),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        **extra,
    }


def tiered_topic_configs(**extra: str) -> dict[str, str]:
    return {"remote.storage.enable": "true", "segment.bytes": "1024",
            "retention.ms": "-1", "local.retention.bytes": "1", **extra}


def batch(i: int, size: int = 200, timestamp: int = START_MS) -> bytes:
    b = RecordBatchBuilder()
    b.append(timestamp + i, b"k%d" % i, bytes([i % 251]) * size)
    return b.build()


@dataclass
class FollowerView:
    """A hosted partition as a follower (a one-broker harness leads all of its own)."""

    topic_partition: TopicPartition
    log: Log
    topic_id: uuid.UUID | None
    leader_epoch: int
    is_leader: bool = False


@dataclass
class Tiered:
    """One broker's replica manager with tiered storage, and its RemoteLogManager."""

    rm: ReplicaManager
    rlm: RemoteLogManager
    clock: ManualClock
    remote_root: Path

    def log(self, partition: int = 0, topic: str = TOPIC) -> Log:
        lg = self.rm.get_log(TopicPartition(topic, partition))
        assert lg is not None
        return lg

    def produce(self, n: int, partition: int = 0, topic: str = TOPIC, start: int = 0,
                size: int = 200) -> None:
        tp = TopicPartition(topic, partition)
        for i in range(start, start + n):
            self.rm.append(tp, batch(i, size), required_acks=1)

    def run(self, passes: int = 1) -> None:
        for _ in range(passes):
            asyncio.run(self.rlm.run_once())

    def remote_files(self) -> list[Path]:
        return sorted(p for p in self.remote_root.rglob("*") if p.is_file())

    def close(self) -> None:
        self.rlm.pool.shutdown(wait=True)
        self.rlm.reader.close()
        self.rm.shutdown()


def open_tiered(log_dir: Path, remote_root: Path, *, clock: ManualClock | None = None,
                rsm: RemoteStorageManager | None = None, partitions: int = 1,
                topic_configs: dict[str, str] | None = None, create: bool = True,
                index_cache_bytes: int | None = None, **props: str) -> Tiered:
    """A one-broker replica manager (topic ``tiered`` created unless ``create`` is false)
    and its RemoteLogManager; the remote storage is ``rsm`` or a directory, with a remote
    index cache of ``index_cache_bytes`` under ``log_dir`` when given."""
    clock = clock or ManualClock(START_MS)
    remote_root.mkdir(parents=True, exist_ok=True)
    all_props = broker_props(log_dir, remote_root, **props)
    rm = ReplicaManager(BrokerConfig(all_props), clock)
    rm.startup()
    if create:
        rm.create_topic(TOPIC, partitions, tiered_topic_configs(**(topic_configs or {})))
    config = RemoteLogManagerConfig.from_props(all_props)

    async def ensure_topic() -> bool:
        if rm.topic(REMOTE_LOG_METADATA_TOPIC) is None:
            rm.create_topic(REMOTE_LOG_METADATA_TOPIC, config.metadata_topic_partitions,
                            config.metadata_topic_configs())
        return True

    def partitions_now() -> Iterable[TieredPartition]:
        return list(rm.partitions.values())

    def topic_exists(name: str, topic_id: object) -> bool:
        info = rm.topic(name)
        return info is not None and info.topic_id == topic_id

    rlmm = TopicBasedRemoteLogMetadataManager(
        appender=PartitionWriter(rm, REMOTE_LOG_METADATA_TOPIC, 5000), get_log=rm.get_log,
        num_partitions=config.metadata_topic_partitions, ensure_topic=ensure_topic)
    storage = rsm if rsm is not None else create_remote_storage_manager(config.rsm_configs)
    cache = None if index_cache_bytes is None else \
        RemoteIndexCache(index_cache_bytes, storage, log_dir)
    rlm = RemoteLogManager(config, broker_id=rm.node_id, rsm=storage, rlmm=rlmm,
                           partitions=partitions_now, topic_exists=topic_exists, clock=clock,
                           seed=1, index_cache=cache)
    return Tiered(rm, rlm, clock, remote_root)
