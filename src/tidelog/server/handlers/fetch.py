"""Fetch (key 1): long poll through the purgatory (woken by HW moves and appends), max_bytes and
per-partition limits, at least one batch even when larger than the limits (while the
response is still empty), HW / LSO / log start offset, OFFSET_OUT_OF_RANGE, and incremental
fetch sessions (KIP-227, ``server/fetch_session.py``). From v13 topics are named by id
(KIP-516): an id unknown here is UNKNOWN_TOPIC_ID, a session partition whose topic was
recreated under the same name (a new id) is INCONSISTENT_TOPIC_ID. Only the leader answers
followers and consumers before v11 (NOT_LEADER_OR_FOLLOWER elsewhere; FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for another current_leader_epoch); a consumer at v11+ reads any replica
up to its high watermark, and the leader may name a preferred read replica instead of
answering records (KIP-392, ``replication/replica_selector.py``). A follower (replica_id, or
v15's replica state, >= 0; CLUSTER_ACTION) reads to the log end and its fetch moves its state
on the leader: its end offset, the ISR, the high watermark; a consumer reads to the HW or
LSO."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData, encode_fetch_response
from tidelog.protocol.kio_util import ms
from tidelog.storage.log_read import FetchIsolation
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import to_error
from ..fetch_session import CachedPartition, FetchKey, FetchPlan, rotate_to_end
from ..quota.wiring import throttle_fetch
from ..remote_fetch import complete_remote_fetch, remote_fetch_info
from ..remote_log_reader import RemoteStorageFetchInfo
from ..replication.replica_selector import preferred_read_replica
from ..security import AclOperation, ResourceType
from ..sendfile import close_chunks, slice_records

if TYPE_CHECKING:
    from tidelog.storage.log import Log

    from ..cluster.partition import Partition

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
READ_COMMITTED = 1
Read = list[tuple[FetchKey, FetchPartitionData]]
YIELD_EVERY = 200  # partition reads between turns of the loop left to other connections


def _isolation(committed: bool, follower: bool) -> FetchIsolation:
    if follower:
        return FetchIsolation.LOG_END
    return FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class Fetcher:
    """Who fetches: a consumer (replica_id -1) or a follower (its id and broker epoch). A
    consumer at v11+ has client metadata (KIP-392): it may read from any replica, and names
    its rack (``client.rack``, empty: none)."""

    replica_id: int = -1
    broker_epoch: int = -1
    client_rack: str | None = None
    any_replica: bool = False

    @property
    def follower(self) -> bool:
        return self.replica_id >= 0


def _fetcher(request: Any, version: int) -> Fetcher:
    state = getattr(request, "replica_state", None)  # v15+ (a consumer's: id -1)
    if state is not None and int(state.replica_id) >= 0:
        return Fetcher(int(state.replica_id), int(state.replica_epoch))
    replica_id = -1 if state is not None else int(getattr(request, "replica_id", -1))
    if replica_id < 0 and version >= 11:
        return Fetcher(replica_id, client_rack=getattr(request, "rack_id", None), any_replica=True)
    return Fetcher(replica_id)


@dataclass(slots=True)
class _Scope:
    """What every partition of one Fetch shares, looked up once per request: who fetches,
    the isolation, the replica selector, and each topic's authorization."""

    ctx: RequestContext
    fetcher: Fetcher
    isolation: FetchIsolation
    by_id: bool
    selector_class: str
    follower: bool
    allowed: dict[str, bool]
    # the partition of this Fetch read from remote storage (one per Fetch, as Kafka)
    remote: list[tuple[RemoteStorageFetchInfo, Log, FetchPartitionData]] = field(
        default_factory=list)

    @classmethod
    def of(cls, ctx: RequestContext, fetcher: Fetcher, isolation: FetchIsolation,
           by_id: bool) -> _Scope:
        selector = ctx.broker.config.values["replica.selector.class"] if fetcher.any_replica else ""
        return cls(ctx, fetcher, isolation, by_id, selector or "", fetcher.follower, {})

    def authorized(self, topic: str) -> bool:
        """READ on the topic before its existence (Kafka's handleFetchRequest), CLUSTER_ACTION
        for a follower."""
        ok = self.allowed.get(topic)
        if ok is None:
            ctx = self.ctx
            ok = self.allowed[topic] = (
                ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
                if self.follower
                else ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic))
        return ok


def _read_partition(scope: _Scope, key: FetchKey, cp: CachedPartition, max_bytes: int,
                    min_one: bool) -> FetchPartitionData:
    out = FetchPartitionData(key.partition)
    # an id unknown here has no name to authorize and stays UNKNOWN_TOPIC_ID below
    if not (scope.by_id and key.unknown_id) and not scope.authorized(key.topic):
        out.error_code, out.records = ErrorCode.TOPIC_AUTHORIZATION_FAILED, b""
        return out
    if scope.by_id:
        code = _topic_id_error(scope.ctx, key)
        if code:
            out.error_code, out.records = code, b""
            return out
    tp = key.tp
    try:
        _read_log(scope, tp, cp, max_bytes, min_one, out)
    except Exception as exc:
        scope.ctx.broker.replica_manager.maybe_handle_io_error(tp, exc)  # a disk error: dir offline
        out.error_code, _ = to_error(exc)
        out.records = b""
    return out


def _read_log(scope: _Scope, tp: TopicPartition, cp: CachedPartition, max_bytes: int,
              min_one: bool, out: FetchPartitionData) -> None:
    ctx, fetcher = scope.ctx, scope.fetcher
    rm = ctx.broker.replica_manager
    partition = (rm.partition_or_error(tp, cp.current_leader_epoch, require_leader=False)
                 if fetcher.any_replica
                 else rm.fetch_partition(tp, fetcher.replica_id, cp.current_leader_epoch))
    lg = partition.log
    leader_end = lg.log_end_offset
    out.high_watermark = lg.high_watermark
    out.last_stable_offset = lg.last_stable_offset
    out.log_start_offset = lg.log_start_offset
    if scope.selector_class:  # KIP-392: the leader may send a consumer elsewhere
        out.preferred_read_replica = preferred_read_replica(
            scope.selector_class, partition,
            fetcher.client_rack, cp.fetch_offset, partition.clock.milliseconds(),
            ctx.broker.metadata_cache.image, ctx.listener_name)
        if out.preferred_read_replica >= 0:  # no records: the consumer goes there
            out.records = b""
            return
    if scope.follower and cp.last_fetched_epoch >= 0:
        diverging = _diverging_epoch(lg, cp)
        if diverging is not None:  # no records, no follower state: it truncates first
            out.records = b""
            if diverging[1] < 0:
                out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                out.diverging_epoch = diverging
            return
    if _tiered(scope, partition, cp, max_bytes, min_one, out):
        return
    if scope.follower and _leader_throttled(ctx, tp, fetcher.replica_id in partition.state.isr):
        out.records = b""  # a throttled replica outside the ISR gets nothing for now
    else:
        info = lg.read(cp.fetch_offset, max_bytes, scope.isolation, min_one)
        # Kafka (fetch v3+) sends nothing rather than a cut batch: a client can't decode
        # the piece, and the partition gets its whole batch once it comes first later.
        out.records = b"" if info.first_entry_incomplete else slice_records(info.records)
        aborted = info.aborted_transactions
        if aborted:
            out.aborted_transactions = [(a.producer_id, a.first_offset) for a in aborted]
    if scope.follower:
        rm.update_follower_fetch_state(partition, fetcher.replica_id, cp.fetch_offset,
                                       cp.fetcher_log_start_offset, fetcher.broker_epoch,
                                       leader_end)
        out.high_watermark = lg.high_watermark  # it may have moved with this fetch


def _tiered(scope: _Scope, partition: Partition, cp: CachedPartition, max_bytes: int,
            min_one: bool, out: FetchPartitionData) -> bool:
    """An offset below a tiered log's local start (at or above its log start): a consumer's
    is read from remote storage after the local reads (Kafka's RemoteStorageFetchInfo); a
    follower is answered OFFSET_MOVED_TO_TIERED_STORAGE and builds its state from remote
    storage (ReplicaFetcherTierStateMachine). True when so (``out`` is answered here)."""
    lg = partition.log
    if scope.follower:
        if lg.remote_log_enabled and \
                lg.log_start_offset <= cp.fetch_offset < lg.local_log_start_offset:
            out.error_code, out.records = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, b""
            return True
        return False
    rlm = scope.ctx.broker.remote_log_manager
    if rlm is None:
        return False
    info = remote_fetch_info(
        partition.log, partition.topic_id, cp.fetch_offset, max_bytes, min_one_message=min_one,
        read_committed=scope.isolation is FetchIsolation.TXN_COMMITTED)
    if info is None:
        return False
    out.records = b""
    if not scope.remote and rlm.fetch_quota.throttle_ms() == 0:
        # one remote partition per Fetch (the others come next time), within the quota
        scope.remote.append((info, partition.log, out))
    return True


async def _complete_remote(scope: _Scope) -> int:
    """Kafka's DelayedRemoteFetch: the remote read, awaited up to remote.fetch.max.wait.ms."""
    rlm = scope.ctx.broker.remote_log_manager
    total = 0
    pending, scope.remote = scope.remote, []
    if rlm is None:  # stopped meanwhile
        return 0
    for info, lg, out in pending:
        total += await complete_remote_fetch(rlm, info, lg, out,
                                             rlm.config.remote_fetch_max_wait_ms)
    return total


def _leader_throttled(ctx: RequestContext, tp: TopicPartition, in_sync: bool) -> bool:
    """Kafka's shouldLeaderThrottle (leader.replication.throttled.*: replication/quota.py)."""
    replication = ctx.broker.replication
    quotas = replication.quotas if replication is not None else None
    return quotas is not None and quotas.leader.should_throttle(tp, in_sync)


def _record_leader_throttled(ctx: RequestContext, read: Read) -> None:
    """The bytes sent for throttled partitions count against the leader's rate."""
    replication = ctx.broker.replication
    quotas = replication.quotas if replication is not None else None
    if quotas is not None:
        quotas.leader.record(sum(_nbytes(d.records) for k, d in read if quotas.leader.is_throttled(k.tp)))


def _diverging_epoch(lg: Any, cp: CachedPartition) -> tuple[int, int] | None:
    """Kafka's Partition.fetchRecords check of a follower's last fetched epoch (Fetch v12+):
    the largest epoch of ours at or below it and where that epoch ends, when the follower's
    log does not agree with ours up to its fetch offset ((-1, -1): we know no such epoch)."""
    epoch, end = lg.end_offset_for_epoch(cp.last_fetched_epoch)
    if epoch < cp.last_fetched_epoch or end < cp.fetch_offset:
        return int(epoch), int(end)
    return None


async def _read_all(scope: _Scope, request: Any, plan: FetchPlan,
                    before: Read | None = None, fired: set[TopicPartition] | None = None,
                    ) -> tuple[Read, int, bool]:
    """Read each partition of the plan; given the ``before`` read of a parked fetch and the
    partitions that ``fired`` since, only those (and any whose records were let go when it
    parked) are read again: nothing else moved. Every ``YIELD_EVERY`` reads the loop serves
    the other connections (a consumer's Fetch of 1,000 partitions takes milliseconds)."""
    budget = max(0, int(getattr(request, "max_bytes", 2**31 - 1)))
    budget = min(budget, int(scope.ctx.broker.config.values["fetch.max.bytes"]))
    total = reads = 0
    error = False
    out: Read = []
    try:
        for i, (key, cp) in enumerate(plan.partitions):
            if before is not None and fired is not None:
                data = before[i][1]
                if not data.records and (key.topic, key.partition) not in fired:
                    out.append((key, data))
                    continue
            reads += 1
            if reads % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            limit = max(0, min(cp.max_bytes, budget - total))
            data = _read_partition(scope, key, cp, limit, total == 0)
            out.append((key, data))
            records = data.records
            if records:
                total += len(records)
            # an error or a preferred read replica answers at once (Kafka's fetchMessages)
            if data.error_code or data.preferred_read_replica >= 0:
                error = True
        if scope.remote:
            total += await _complete_remote(scope)
    except BaseException:  # cancelled between reads: the file chunks read so far go
        _release(out)
        raise
    return out, total, error


def _topic_id_error(ctx: RequestContext, key: FetchKey) -> ErrorCode:
    if key.unknown_id:
        return ErrorCode.UNKNOWN_TOPIC_ID
    topic = ctx.broker.metadata_cache.image.topic(key.topic)
    if topic is not None and topic.topic_id != key.topic_id:
        return ErrorCode.INCONSISTENT_TOPIC_ID
    return ErrorCode.NONE


def _resolver(ctx: RequestContext) -> Any:
    image = ctx.broker.metadata_cache.image

    def resolve(topic_id: uuid.UUID) -> str | None:
        topic = image.topic_by_id(topic_id)
        return topic.name if topic is not None else None

    return resolve


def _shape(
    plan: FetchPlan, read: Read, by_id: bool
) -> list[tuple[str | uuid.UUID, list[FetchPartitionData]]]:
    """Group by topic (in plan order); an incremental session sends only what changed."""
    topics: dict[str | uuid.UUID, list[FetchPartitionData]] = {}
    served = []
    for (key, data), (_, cp) in zip(read, plan.partitions, strict=True):
        has_records = bool(len(data.records or b""))
        changed = cp.changed(data.high_watermark, data.last_stable_offset, data.log_start_offset)
        # Kafka's maybeUpdateResponseData: records, a changed offset, an error, a preferred
        # replica or a diverging epoch (a follower must truncate) are always answered
        if plan.incremental and not (has_records or data.error_code or changed
                                     or data.preferred_read_replica >= 0
                                     or data.diverging_epoch is not None):
            close_chunks([data.records])
            continue
        cp.high_watermark = data.high_watermark if not data.error_code else -1  # resent later
        cp.last_stable_offset = data.last_stable_offset
        cp.log_start_offset = data.log_start_offset
        if has_records:
            served.append(key)
        topics.setdefault(key.topic_id if by_id else key.topic, []).append(data)
    if plan.session is not None and plan.incremental:
        rotate_to_end(plan.session, served)
    return list(topics.items())


async def _long_poll(scope: _Scope, request: Any, plan: FetchPlan) -> Read:
    """Read; short of ``min_bytes``, park until a partition fires (then read those again) or
    the wait runs out (then read everything once more), as Kafka's DelayedFetch."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms(request.max_wait) / 1000
    tps: list[TopicPartition] | None = None
    read, total, error = await _read_all(scope, request, plan)
    while True:
        remaining = int((deadline - loop.time()) * 1000)
        if total >= request.min_bytes or error or remaining <= 0:
            return read
        if tps is None:
            tps = [key.tp for key, _ in plan.partitions if not (plan.by_id and key.unknown_id)]
        if not tps:
            return read
        _release(read)  # parked: what it held is read again when woken
        fired = await scope.ctx.broker.purgatory.wait(tps, remaining)
        if not fired:
            return (await _read_all(scope, request, plan))[0]
        read, total, error = await _read_all(scope, request, plan, read, fired)


async def handle(ctx: RequestContext, request: Any) -> Any:
    fetcher = _fetcher(request, ctx.api_version)
    isolation = _isolation(getattr(request, "isolation_level", 0) == READ_COMMITTED,
                           fetcher.follower)
    sessions = ctx.broker.fetch_sessions
    plan = sessions.plan(request, ctx.api_version, _resolver(ctx), privileged=fetcher.follower)
    if plan.error:
        return encode_fetch_response(
            ctx.correlation_id, ctx.api_version, [], error_code=plan.error, session_id=0
        )
    read = await _long_poll(_Scope.of(ctx, fetcher, isolation, plan.by_id), request, plan)
    if fetcher.follower:
        _record_leader_throttled(ctx, read)
    try:
        topics = _shape(plan, read, plan.by_id)
    except BaseException:
        _release(read)
        raise
    if not fetcher.follower:  # follower fetches are never throttled by client quotas
        size = sum(_nbytes(p.records) for _, parts in topics for p in parts)
        throttle_ms = throttle_fetch(ctx, size)
        if throttle_ms > 0:  # over consumer_byte_rate: answered empty, as Kafka
            _release(read)
            return encode_fetch_response(ctx.correlation_id, ctx.api_version, [],
                                         session_id=plan.response_session_id,
                                         throttle_time_ms=throttle_ms)
    _record_bytes_out(ctx, read, fetcher.follower)
    sessions.record_answer(fetcher.follower, sum(len(parts) for _, parts in topics))
    return encode_fetch_response(
        ctx.correlation_id, ctx.api_version, topics, session_id=plan.response_session_id
    )


def _nbytes(records: Any) -> int:
    if records is None:
        return 0
    return records.nbytes if isinstance(records, memoryview) else len(records)


def _release(read: Read) -> None:
    close_chunks(data.records for _, data in read)


def _record_bytes_out(ctx: RequestContext, read: Read, follower: bool) -> None:
    """BytesOutPerSec (ReplicationBytesOutPerSec for a follower) and
    Total/FailedFetchRequestsPerSec per topic (Kafka's updateBytesOut), for topics that exist
    (no series for names a client made up): summed per topic, then recorded once each."""
    rm = ctx.broker.replica_manager
    stats = getattr(rm, "topic_stats", None)
    if stats is None:
        return
    sums: dict[str, list[int]] = {}  # topic -> [partitions, bytes, failed]
    for key, data in read:
        s = sums.get(key.topic)
        if s is None:
            s = sums[key.topic] = [0, 0, 0]
        s[0] += 1
        records = data.records
        if records:
            s[1] += len(records)
        if data.error_code:
            s[2] += 1
    for topic, (partitions, size, failed) in sums.items():
        if rm.topic(topic) is not None:
            stats.record_fetch(topic, size, failed, follower, partitions)
