"""Topic admin work that touches many files, off the event loop (CreateTopics, DeleteTopics,
CreatePartitions).

Creating a partition costs several file operations (mkdir, segment and index files,
partition.metadata, fsyncs): ~10 ms each, so 2000 partitions on the loop would stall every
client for tens of seconds. Here the file work runs on the ReplicaManager's single admin
thread (admin operations stay in order, one at a time) while the loop keeps serving; the
loop only validates before and publishes after, so a topic is visible to clients only once
every log exists, and the metadata store is written from the loop alone. A topic being
created or deleted is "pending": a second create of the name answers TOPIC_ALREADY_EXISTS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

from .errors import ApiError
from .metadata_store import TopicInfo
from .replica_manager import INTERNAL_TOPICS

log = logging.getLogger(__name__)


async def _off_loop(rm: Any, fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(rm.admin_executor(), fn, *args)


_RUNNING: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _RUNNING.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: the request that asked may be gone


async def _to_completion(coro: Coroutine[Any, Any, Any]) -> Any:
    """Admin work runs to its end even when the asking request is cancelled (its client
    disconnected): cut short after the files were made, a create left logs no topic names
    and its name free, so the next create (a retried FindCoordinator) made them twice."""
    task = asyncio.ensure_future(coro)
    _RUNNING.add(task)
    task.add_done_callback(_forget)
    return await asyncio.shield(task)


async def drain(timeout_s: float = 60.0) -> None:
    """Broker stop: let this loop's admin work in flight finish before the logs close, so no
    log is made and no topic published after the log manager's clean-shutdown marker."""
    loop = asyncio.get_running_loop()
    mine = [t for t in _RUNNING if t.get_loop() is loop and not t.done()]
    if mine:
        await asyncio.wait(mine, timeout=timeout_s)


async def create_topic(
    rm: Any,
    name: str,
    partitions: int,
    configs: Mapping[str, str] | None = None,
    *,
    validate_only: bool = False,
) -> TopicInfo:
    return await _to_completion(
        _create_topic(rm, name, partitions, configs, validate_only=validate_only)
    )


async def _create_topic(
    rm: Any,
    name: str,
    partitions: int,
    configs: Mapping[str, str] | None = None,
    *,
    validate_only: bool = False,
) -> TopicInfo:
    info = rm.new_topic_info(name, partitions, configs)
    if validate_only:
        return info
    rm.pending_topics.add(name)
    try:
        await _off_loop(rm, rm.create_logs, info, range(partitions))
    finally:
        rm.pending_topics.discard(name)
    rm.store.topics[name] = info
    try:
        rm.store.save()
    except Exception:
        del rm.store.topics[name]
        await _off_loop(rm, rm.logs.abandon_logs, _tps(name, range(partitions)))
        raise
    log.info("created topic %s (%d partitions, configs %s)", name, partitions, info.configs)
    return info


async def delete_topic(rm: Any, name: str) -> TopicInfo:
    return await _to_completion(_delete_topic(rm, name))


async def _delete_topic(rm: Any, name: str) -> TopicInfo:
    info: TopicInfo | None = rm.store.topics.get(name)
    if info is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not rm.config.values["delete.topic.enable"]:
        raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED)
    # Gone for clients first (and durably: a crash now leaves stray logs that start-up
    # removes), then the per-partition renames off the loop.
    del rm.store.topics[name]
    if getattr(rm, "topic_stats", None) is not None:
        rm.topic_stats.remove_topic(name)
    rm.store.save()
    rm.pending_topics.add(name)
    try:
        await _off_loop(rm, _delete_logs, rm, _tps(name, range(info.partitions)))
    finally:
        rm.pending_topics.discard(name)
    log.info("deleted topic %s", name)
    return info


def _delete_logs(rm: Any, tps: list[TopicPartition]) -> None:
    for tp in tps:
        rm.logs.delete_log(tp)


async def create_partitions(
    rm: Any, name: str, count: int, *, validate_only: bool = False
) -> None:
    await _to_completion(_create_partitions(rm, name, count, validate_only=validate_only))


async def _create_partitions(
    rm: Any, name: str, count: int, *, validate_only: bool = False
) -> None:
    info: TopicInfo | None = rm.store.topics.get(name)
    if info is None or name in rm.pending_topics:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    if count <= info.partitions:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {info.partitions} partitions, which is higher "
            f"than or equal to the requested {count}.",
        )
    if validate_only:
        return
    old = info.partitions
    rm.pending_topics.add(name)
    try:
        await _off_loop(rm, rm.create_logs, info, range(old, count))
    finally:
        rm.pending_topics.discard(name)
    info.partitions = count
    try:
        rm.store.save()
    except Exception:
        info.partitions = old
        await _off_loop(rm, rm.logs.abandon_logs, _tps(name, range(old, count)))
        raise


async def auto_create(rm: Any, name: str) -> TopicInfo | None:
    """``rm.auto_create`` with the file work off the loop: the topic with broker defaults
    if auto.create.topics.enable, else (or while another request creates it) None."""
    if not rm.config.values["auto.create.topics.enable"] or name in INTERNAL_TOPICS:
        return None
    try:
        return await create_topic(rm, name, int(rm.config.values["num.partitions"]))
    except ApiError:
        return rm.store.topics.get(name)  # None while pending: the client retries


async def ensure_internal_topic(
    rm: Any, name: str, partitions: int, configs: Mapping[str, str]
) -> bool:
    """Kafka's getOrCreateInternalTopic for FindCoordinator: True once ``name`` exists,
    creating it off the loop first; False while another request is creating it (the
    caller answers COORDINATOR_NOT_AVAILABLE, which clients retry, as Kafka does)."""
    if rm.topic(name) is not None:
        return True
    if name in rm.pending_topics:
        return False
    log.info("creating %s with %d partitions", name, partitions)
    try:
        await create_topic(rm, name, partitions, configs)
    except ApiError:
        return rm.topic(name) is not None
    return True


def _tps(name: str, partitions: range) -> list[TopicPartition]:
    return [TopicPartition(name, p) for p in partitions]


__all__ = [
    "auto_create", "create_partitions", "create_topic", "delete_topic", "ensure_internal_topic",
]
