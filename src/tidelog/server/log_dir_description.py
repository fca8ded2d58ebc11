"""What DescribeLogDirs answers of this broker's log dirs (the data of Kafka's
ReplicaManager.describeLogDirs): each hosted replica's size in the dir that holds it, a replica
being moved (AlterReplicaLogDirs) also in its target dir as a future replica with its lag
behind the current log, and the dirs that failed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tidelog.storage.log import Log
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(slots=True)
class LogDirDescription:
    """One log dir: its replicas by topic; ``offline`` when it failed."""

    path: Path
    topics: dict[str, list[ReplicaDescription]] = field(default_factory=dict)
    offline: bool = False

    def add(self, topic: str, replica: ReplicaDescription) -> None:
        self.topics.setdefault(topic, []).append(replica)


def describe_log_dirs(logs: LogManager, configured: Iterable[Path],
                      partitions: Iterable[TopicPartition],
                      futures: Mapping[TopicPartition, Log]) -> list[LogDirDescription]:
    """The configured dirs (and any other holding a log), each with the replicas of
    ``partitions`` it holds and the ``futures`` being moved into it."""
    by_dir = {d.resolve(): LogDirDescription(d.resolve()) for d in configured}

    def at(lg: Log) -> LogDirDescription:
        parent = Path(lg.dir).resolve().parent
        found = by_dir.get(parent)
        if found is None:
            found = by_dir[parent] = LogDirDescription(parent)
        return found

    for tp in partitions:
        lg = logs.get_log(tp)
        if lg is not None:
            at(lg).add(tp.topic, ReplicaDescription(tp.partition, lg.size_in_bytes, 0, False))
    for tp, future in futures.items():
        current = logs.get_log(tp)
        lag = max(0, current.log_end_offset - future.log_end_offset) if current else 0
        at(future).add(tp.topic, ReplicaDescription(tp.partition, future.size_in_bytes, lag,
                                                    True))
    offline = {Path(p).resolve() for p in logs.failure_channel.offline_log_dirs()}
    for d in by_dir.values():
        d.offline = d.path in offline
    return list(by_dir.values())
