"""Kafka's DelayedRemoteFetch for the Fetch path: a consumer's fetch offset below a tiered
log's local start (and at or above its log start) is read from remote storage, off the
event loop, while the other partitions of the Fetch are read locally as usual.

``remote_fetch_info`` says whether a partition's read goes remote (Kafka's
RemoteStorageFetchInfo, one partition per Fetch as in Kafka); ``complete_remote_fetch``
waits for the read up to ``remote.fetch.max.wait.ms`` and puts its batches (bytes) in the
partition's answer. A failed read answers that partition with Kafka's error for it
(UNKNOWN_SERVER_ERROR: the client retries); a read still running at the deadline answers no
records, and the client fetches again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.storage.log import Log
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.util.topic_partition import TopicPartition

from .remote_log_manager import RemoteLogManager
from .remote_log_reader import RemoteFetchResult, RemoteStorageFetchInfo


class PartitionAnswer(Protocol):
    """The fields of a Fetch partition answer the remote read fills (protocol.fast's
    FetchPartitionData)."""

    error_code: int
    records: object
    aborted_transactions: list[tuple[int, int]] | None


def remote_fetch_info(lg: Log, topic_id: uuid.UUID | None, fetch_offset: int, max_bytes: int, *,
                      min_one_message: bool, read_committed: bool
                      ) -> RemoteStorageFetchInfo | None:
    """The remote read for a consumer's fetch at ``fetch_offset``, or None when the local
    log serves it (not tiered, at or above the local start, or below the log start)."""
    if not lg.remote_log_enabled or topic_id is None:
        return None
    if not lg.log_start_offset <= fetch_offset < lg.local_log_start_offset:
        return None
    tp = lg.topic_partition
    if tp is None:
        return None
    return RemoteStorageFetchInfo(TopicIdPartition(topic_id, tp.topic, tp.partition),
                                  fetch_offset, max_bytes, min_one_message, read_committed)


async def complete_remote_fetch(rlm: RemoteLogManager, info: RemoteStorageFetchInfo, lg: Log,
                                out: PartitionAnswer, max_wait_ms: int) -> int:
    """Read ``info`` remotely into ``out`` (waiting at most ``max_wait_ms``); returns the
    bytes put in the answer."""
    task = asyncio.ensure_future(rlm.read(info, lg))
    try:
        result: RemoteFetchResult = await asyncio.wait_for(asyncio.shield(task),
                                                           max_wait_ms / 1000)
    except TimeoutError:  # Kafka's DelayedRemoteFetch expiry: nothing for this partition
        task.cancel()
        out.records = b""
        return 0
    if result.error is not None:
        out.error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        out.records = b""
        return 0
    out.records = result.records
    if result.aborted_transactions is not None:
        out.aborted_transactions = [(a.producer_id, a.first_offset)
                                    for a in result.aborted_transactions]
    return len(result.records)


class _FetchOffset(Protocol):
    @property
    def fetch_offset(self) -> int: ...


class SeamFetchInfo(Protocol):
    """The ReplicaManager's RemoteStorageFetchInfo (its remote-read seam) as read here."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def fetch(self) -> _FetchOffset: ...

    @property
    def max_bytes(self) -> int: ...

    @property
    def min_one_message(self) -> bool: ...

    @property
    def isolation(self) -> FetchIsolation: ...

    @property
    def out(self) -> PartitionAnswer: ...


class _TieredPartition(Protocol):
    @property
    def log(self) -> Log: ...

    @property
    def topic_id(self) -> uuid.UUID | None: ...


def remote_fetch_for(rlm: RemoteLogManager,
                     get_partition: Callable[[TopicPartition], _TieredPartition | None]
                     ) -> Callable[[object, Sequence[SeamFetchInfo]], Awaitable[None]]:
    """``ReplicaManager.remote_fetch``: the first read of a Fetch below the local starts is
    read remotely (Kafka reads one per Fetch), the others answer no records this time; no
    read while ``remote.log.manager.fetch.max.bytes.per.second`` is used up."""
    async def remote_fetch(_params: object, infos: Sequence[SeamFetchInfo]) -> None:
        for info in infos:
            info.out.records = b""
        if not infos or rlm.fetch_quota.throttle_ms() > 0:
            return
        first = infos[0]
        p = get_partition(first.topic_partition)
        if p is None:
            return
        remote = remote_fetch_info(
            p.log, p.topic_id, first.fetch.fetch_offset, first.max_bytes,
            min_one_message=first.min_one_message,
            read_committed=first.isolation is FetchIsolation.TXN_COMMITTED)
        if remote is not None:
            await complete_remote_fetch(rlm, remote, p.log, first.out,
                                        rlm.config.remote_fetch_max_wait_ms)

    return remote_fetch
