"""The fetch half of the ReplicaManager (a mixin, as ``replica_appends.py``): Kafka's
fetchMessages, readFromLocalLog and DelayedFetch. Each partition is read through its
``Partition.fetch_records`` (epochs, diverging epoch, the read, a follower's state); a read
short of ``min_bytes`` parks in the fetch purgatory until a partition fires (then those are
read again) or the wait runs out (then everything once more).

The remote (tiered) read seam, as Kafka's handleOffsetOutOfRangeError and DelayedRemoteFetch:
a consumer's read that raises OffsetOutOfRangeError at an offset in
``[partition.log_start_offset, partition.local_log_start_offset)`` of a topic with
``remote.storage.enable`` becomes a ``RemoteStorageFetchInfo`` (its ``out`` left without
records) when ``ReplicaManager.remote_fetch`` is set; once every partition was read locally,
``fetch_messages`` awaits ``remote_fetch(params, infos)`` (which fills each ``info.out``:
``records``, or ``error_code``) and answers without parking. A follower's read there is
answered OFFSET_MOVED_TO_TIERED_STORAGE. ``remote_fetch`` is set by the broker's
RemoteLogManager (``remote_fetch.remote_fetch_for``); without tiered storage it is None and
such a read answers OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData
from tidelog.storage.errors import OffsetOutOfRangeError
from tidelog.storage.log_read import FetchIsolation
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from .cluster.fetch_params import FetchParams, PartitionFetchData
from .cluster.partition import Partition
from .errors import ApiError, to_error
from .fetch_session import CachedPartition, FetchKey
from .metadata.cache import MetadataCache
from .purgatory import FetchPurgatory
from .replication.replica_selector import preferred_read_replica
from .sendfile import close_chunks

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig

    from .replication.quota import ReplicationQuotaManager

Read = list[tuple[FetchKey, FetchPartitionData]]
# the handler's decision on a partition before it is read: authorization, topic ids (0: read)
Precheck = Callable[[FetchKey], int]
YIELD_EVERY = 200  # partition reads between turns of the loop left to other connections


@dataclass(slots=True)
class RemoteStorageFetchInfo:
    """Kafka's RemoteStorageFetchInfo: a consumer's read of ``topic_partition`` below its
    local log's start, for the remote tier to answer into ``out`` (``out.records``: the
    batches as bytes; or ``out.error_code``). The offsets of ``out`` (HW, LSO, log start)
    are set already."""

    topic_partition: TopicPartition
    fetch: PartitionFetchData  # fetch_offset, max_bytes, current_leader_epoch ...
    max_bytes: int  # this partition's share of the request's budget
    min_one_message: bool
    isolation: FetchIsolation
    out: FetchPartitionData


# ReplicaManager.remote_fetch: answers every info of one Fetch (Kafka's DelayedRemoteFetch)
RemoteFetch = Callable[[FetchParams, list[RemoteStorageFetchInfo]], Awaitable[None]]


@dataclass(slots=True)
class _FetchRequest:
    """What every partition of one Fetch shares, looked up once per request."""

    params: FetchParams
    precheck: Precheck
    quota: ReplicationQuotaManager | None
    selector_class: str
    remote: list[RemoteStorageFetchInfo] = field(default_factory=list)


class ReplicaFetches:
    config: BrokerConfig
    clock: Clock
    metadata_cache: MetadataCache
    partitions: dict[TopicPartition, Partition]
    delayed_fetch: FetchPurgatory
    remote_fetch: RemoteFetch | None

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        raise NotImplementedError  # the ReplicaManager's

    def maybe_handle_io_error(self, tp: TopicPartition, exc: BaseException) -> bool:
        raise NotImplementedError  # the ReplicaManager's

    async def fetch_messages(self, params: FetchParams,
                             fetch_infos: Sequence[tuple[FetchKey, CachedPartition]],
                             precheck: Precheck,
                             quota: ReplicationQuotaManager | None = None) -> Read:
        """Kafka's fetchMessages: read each partition (``precheck``'s error answers it
        unread); short of ``params.min_bytes``, with no error, park until a partition fires
        (then read those again) or ``params.max_wait_ms`` runs out (then read everything
        once more), as DelayedFetch. ``quota``: the leader's replication quota, for a
        follower. Reads below the local log's start go to ``remote_fetch`` (see the module's
        docstring). The caller releases the records (``sendfile.close_chunks``)."""
        selector = ""
        if params.client_metadata is not None:  # KIP-392: the leader may send it elsewhere
            selector = self.config.values["replica.selector.class"] or ""
        r = _FetchRequest(params, precheck, quota, selector)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + params.max_wait_ms / 1000
        tps: list[TopicPartition] | None = None
        read, total, error = await self._read_all(r, fetch_infos)
        while not r.remote:
            remaining = int((deadline - loop.time()) * 1000)
            if total >= params.min_bytes or error or remaining <= 0 or not fetch_infos:
                return read
            if tps is None:
                tps = [key.tp for key, _ in fetch_infos]
            _release(read)  # parked: what it held is read again when woken
            fired = await self.delayed_fetch.wait(tps, remaining, params.replica_id)
            if not fired:  # timed out: everything once more, answered whatever it finds
                read = (await self._read_all(r, fetch_infos))[0]
                break
            read, total, error = await self._read_all(r, fetch_infos, read, fired)
        if r.remote:
            await self._fetch_remote(r)
        return read

    async def _fetch_remote(self, r: _FetchRequest) -> None:
        """The remote tier answers the reads below the local logs' start (DelayedRemoteFetch)."""
        remote_fetch = self.remote_fetch
        assert remote_fetch is not None  # a RemoteStorageFetchInfo is only made with one
        infos, r.remote = r.remote, []
        await remote_fetch(r.params, infos)

    async def _read_all(self, r: _FetchRequest,
                        fetch_infos: Sequence[tuple[FetchKey, CachedPartition]],
                        before: Read | None = None, fired: set[TopicPartition] | None = None,
                        ) -> tuple[Read, int, bool]:
        """Read each partition; given the ``before`` read of a parked fetch and the
        partitions that ``fired`` since, only those (and any whose records were let go when
        it parked) are read again: nothing else moved. Every ``YIELD_EVERY`` reads the loop
        serves the other connections (a Fetch of 1,000 partitions takes milliseconds)."""
        budget = r.params.max_bytes
        total = reads = 0
        error = False
        out: Read = []
        try:
            for i, (key, cp) in enumerate(fetch_infos):
                if before is not None and fired is not None:
                    data = before[i][1]
                    if not data.records and (key.topic, key.partition) not in fired:
                        out.append((key, data))
                        continue
                reads += 1
                if reads % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                limit = max(0, min(cp.max_bytes, budget - total))
                data = self._read_partition(r, key, cp, limit, total == 0)
                out.append((key, data))
                records = data.records
                if records:
                    total += len(records)
                # an error or a preferred read replica answers at once (Kafka's fetchMessages)
                if data.error_code or data.preferred_read_replica >= 0:
                    error = True
        except BaseException:  # cancelled between reads: the file chunks read so far go
            _release(out)
            raise
        return out, total, error

    def _read_partition(self, r: _FetchRequest, key: FetchKey, cp: CachedPartition,
                        max_bytes: int, min_one: bool) -> FetchPartitionData:
        out = FetchPartitionData(key.partition)
        code = r.precheck(key)
        if code:
            out.error_code, out.records = code, b""
            return out
        tp = key.tp
        try:
            self._read_from_local_log(r, tp, cp, max_bytes, min_one, out)
        except Exception as exc:
            self._read_failed(r, tp, cp, max_bytes, min_one, out, exc)
        return out

    def _read_failed(self, r: _FetchRequest, tp: TopicPartition, cp: CachedPartition,
                     max_bytes: int, min_one: bool, out: FetchPartitionData,
                     exc: Exception) -> None:
        """A partition's read raised ``exc``: below the local log's start it goes to the
        remote tier (``_remote_fetch_info``); else ``out`` answers its error code (a disk
        error takes the partition's dir offline)."""
        if isinstance(exc, OffsetOutOfRangeError) and self._remote_fetch_info(
                r, tp, cp, max_bytes, min_one, out):
            return
        self.maybe_handle_io_error(tp, exc)  # a disk error: its dir goes offline
        out.error_code, _ = to_error(exc)
        out.records = b""

    def _read_from_local_log(self, r: _FetchRequest, tp: TopicPartition, cp: CachedPartition,
                             max_bytes: int, min_one: bool, out: FetchPartitionData) -> None:
        """Kafka's readFromLocalLog for one partition: a consumer may be sent to another
        replica (KIP-392); a follower outside the ISR of a throttled partition reads
        nothing (``leader.replication.throttled.replicas``)."""
        partition = self.get_partition(tp)
        if partition is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           "This server does not host this topic-partition.")
        params = r.params
        if r.selector_class:
            partition.fetch_offset_snapshot(cp.current_leader_epoch, False, out)
            meta = params.client_metadata
            assert meta is not None
            out.preferred_read_replica = preferred_read_replica(
                r.selector_class, partition, meta.rack_id, cp.fetch_offset,
                partition.clock.milliseconds(), self.metadata_cache.image,
                meta.listener_name or "")
            if out.preferred_read_replica >= 0:  # no records: the consumer goes there
                out.records = b""
                return
        quota = r.quota
        throttled = (quota is not None and params.replica_id >= 0
                     and quota.should_throttle(tp, params.replica_id in partition.state.isr))
        partition.fetch_records(params, cp, out, max_bytes, min_one, throttled)

    def _remote_fetch_info(self, r: _FetchRequest, tp: TopicPartition, cp: CachedPartition,
                           max_bytes: int, min_one: bool, out: FetchPartitionData) -> bool:
        """The remote-read seam (Kafka's handleOffsetOutOfRangeError): True when a consumer's
        out-of-range read lies in the remote tier and was queued for ``remote_fetch``, or a
        follower's was answered OFFSET_MOVED_TO_TIERED_STORAGE (it builds its state from
        remote storage, Kafka's ReplicaFetcherTierStateMachine)."""
        if self.remote_fetch is None:
            return False
        partition = self.partitions.get(tp)
        if partition is None or not partition.remote_storage_enabled:
            return False
        if not partition.log_start_offset <= cp.fetch_offset < partition.local_log_start_offset:
            return False
        out.records = b""
        if r.params.replica_id >= 0:
            out.error_code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
            out.high_watermark = partition.high_watermark
            out.log_start_offset = partition.log_start_offset
            return True
        r.remote.append(RemoteStorageFetchInfo(tp, cp, max_bytes, min_one, r.params.isolation,
                                               out))
        return True


def _release(read: Read) -> None:
    close_chunks(data.records for _, data in read)
