"""Topic administration (Kafka's ZkAdminManager): CreateTopics, DeleteTopics,
CreatePartitions and topic configs go through an ``AdminManager``, so the handlers do not
change between a one-broker cluster (``LocalAdminManager``, below) and a ZooKeeper cluster
(whose manager writes the znodes and waits for the cache to show the partitions' leaders).

The local manager makes the files off the event loop: creating a partition costs several
file operations (mkdir, segment and index files, partition.metadata, fsyncs), ~10 ms each, so
2000 partitions on the loop would stall every client for tens of seconds. The file work runs
on the ReplicaManager's single admin thread (admin operations stay in order, one at a time)
while the loop keeps serving; the loop only validates before and publishes after, so a topic
is visible to clients only once every log exists, and the metadata store is written from the
loop alone. A topic being created or deleted is "pending": a second create of the name
answers TOPIC_ALREADY_EXISTS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

from ..errors import ApiError
from .store import TopicInfo

if TYPE_CHECKING:
    from ..replica_manager import ReplicaManager

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_MS = 30_000
T = TypeVar("T")


@dataclass(frozen=True)
class NewTopic:
    """One CreateTopics entry: a partition count and replication factor (-1: the broker's
    defaults) or an explicit assignment (partition -> replicas), and config overrides."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    configs: Mapping[str, str] = field(default_factory=dict)


class AdminManager(Protocol):
    async def create_topic(self, topic: NewTopic, *, validate_only: bool = False,
                           timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo: ...

    async def delete_topic(self, name: str, *,
                           timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo: ...

    async def create_partitions(self, name: str, count: int, *,
                                assignment: Sequence[tuple[int, ...]] | None = None,
                                validate_only: bool = False,
                                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None: ...

    def alter_topic_configs(self, name: str, configs: Mapping[str, str], *,
                            validate_only: bool = False) -> None: ...

    async def auto_create(self, name: str) -> TopicInfo | None:
        """The topic with broker defaults if auto.create.topics.enable (and not internal),
        else (or while another request creates it) None."""
        ...

    async def ensure_internal_topic(self, name: str, partitions: int,
                                    configs: Mapping[str, str],
                                    replication_factor: int = 1) -> bool:
        """Kafka's getOrCreateInternalTopic for FindCoordinator: True once ``name`` exists,
        False while it is being created (the caller answers COORDINATOR_NOT_AVAILABLE)."""
        ...

    async def drain(self, timeout_s: float = 60.0) -> None:
        """Broker stop: let admin work in flight finish before the logs close."""
        ...


class LocalAdminManager:
    """A one-broker cluster's admin: every replica is this broker."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.rm = replica_manager
        self._running: set[asyncio.Task[Any]] = set()

    # -- running admin work -------------------------------------------------------------------
    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.rm.admin_executor(), fn, *args)

    async def _to_completion(self, coro: Coroutine[Any, Any, T]) -> T:
        """Admin work runs to its end even when the asking request is cancelled (its client
        disconnected): cut short after the files were made, a create left logs no topic
        names and its name free, so the next create (a retried FindCoordinator) made them
        twice."""
        task = asyncio.ensure_future(coro)
        self._running.add(task)
        task.add_done_callback(self._forget)
        return await asyncio.shield(task)

    def _forget(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the request that asked may be gone

    async def drain(self, timeout_s: float = 60.0) -> None:
        mine = [t for t in self._running if not t.done()]
        if mine:
            await asyncio.wait(mine, timeout=timeout_s)

    # -- topics -------------------------------------------------------------------------------
    def _partition_count(self, topic: NewTopic) -> int:
        if topic.assignment:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.",
                )
            # every replica is here whatever the assignment names, as a one-broker tidelog
            # always took it (clients' suites assign to broker 0)
            return len(topic.assignment)
        rf = topic.replication_factor
        if rf not in (-1, 1):
            raise ApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication "
                f"factor of {rf} cannot be reached because only 1 broker(s) are registered.",
            )
        if topic.num_partitions == -1:
            return int(self.rm.config.values["num.partitions"])
        return topic.num_partitions

    async def create_topic(self, topic: NewTopic, *, validate_only: bool = False,
                           timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo:
        return await self._to_completion(self._create(topic, validate_only))

    async def _create(self, topic: NewTopic, validate_only: bool) -> TopicInfo:
        # validated and marked pending in one step: no other create of the name between
        info = self.rm.new_topic_info(topic.name, self._partition_count(topic), topic.configs)
        if validate_only:
            return info
        rm = self.rm
        rm.pending_topics.add(info.name)
        try:
            await self._off_loop(rm.create_logs, info, range(info.partitions))
        finally:
            rm.pending_topics.discard(info.name)
        try:
            rm.publish_topic(info)
        except Exception:
            await self._off_loop(rm.logs.abandon_logs, _tps(info.name, range(info.partitions)))
            raise
        log.info("created topic %s (%d partitions, configs %s)", info.name, info.partitions,
                 dict(info.configs))
        return info

    async def delete_topic(self, name: str, *,
                           timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo:
        return await self._to_completion(self._delete(name))

    async def _delete(self, name: str) -> TopicInfo:
        rm = self.rm
        # Gone for clients first (and durably: a crash now leaves stray logs that start-up
        # removes), then the per-partition renames off the loop.
        info = rm.unpublish_topic(name)
        rm.pending_topics.add(name)
        try:
            await self._off_loop(rm.delete_logs, _tps(name, range(info.partitions)))
        finally:
            rm.pending_topics.discard(name)
        log.info("deleted topic %s", name)
        return info

    async def create_partitions(self, name: str, count: int, *,
                                assignment: Sequence[tuple[int, ...]] | None = None,
                                validate_only: bool = False,
                                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        return await self._to_completion(self._grow(name, count, assignment, validate_only))

    async def _grow(self, name: str, count: int,
                    assignment: Sequence[tuple[int, ...]] | None, validate_only: bool) -> None:
        rm = self.rm
        info = rm.topic(name)
        if info is None or name in rm.pending_topics:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        if count <= info.partitions:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.partitions} partitions, which is higher "
                f"than or equal to the requested {count}.",
            )
        if assignment is not None and len(assignment) != count - info.partitions:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"Increasing the number of partitions by {count - info.partitions} "
                           f"but {len(assignment)} assignments provided.")
        if validate_only:
            return
        old = info.partitions
        rm.pending_topics.add(info.name)
        try:
            await self._off_loop(rm.create_logs, info, range(old, count))
        finally:
            rm.pending_topics.discard(info.name)
        try:
            rm.publish_topic(replace(info, partitions=count))
        except Exception:
            await self._off_loop(rm.logs.abandon_logs, _tps(info.name, range(old, count)))
            raise

    def alter_topic_configs(self, name: str, configs: Mapping[str, str], *,
                            validate_only: bool = False) -> None:
        self.rm.set_topic_configs(name, configs, validate_only=validate_only)

    async def auto_create(self, name: str) -> TopicInfo | None:
        rm = self.rm
        if not rm.config.values["auto.create.topics.enable"] or name in rm.internal_topics:
            return None
        try:
            return await self.create_topic(NewTopic(name))
        except ApiError:
            return rm.topic(name)  # None while pending: the client retries

    async def ensure_internal_topic(self, name: str, partitions: int,
                                    configs: Mapping[str, str],
                                    replication_factor: int = 1) -> bool:
        rm = self.rm
        if rm.topic(name) is not None:
            return True
        if name in rm.pending_topics:
            return False
        log.info("creating %s with %d partitions", name, partitions)
        try:
            await self.create_topic(NewTopic(name, partitions, configs=configs))
        except ApiError:
            return rm.topic(name) is not None
        return True


def _tps(name: str, partitions: range) -> list[TopicPartition]:
    return [TopicPartition(name, p) for p in partitions]

