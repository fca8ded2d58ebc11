"""Fetch (key 1): the handler decodes, authorizes and encodes; the reads, the long poll
(DelayedFetch) and each partition's checks are the ReplicaManager's ``fetch_messages``
(``server/replica_fetches.py``) and ``Partition.fetch_records``. Here: who fetches
(``FetchParams``: a follower by replica_id or v15's replica state; a consumer at v11+ with
client metadata, KIP-392), incremental fetch sessions (KIP-227, ``server/fetch_session.py``),
READ on each topic (CLUSTER_ACTION for a follower), topic ids from v13 (KIP-516: an id unknown
here is UNKNOWN_TOPIC_ID, a session partition whose topic was recreated under the same name is
INCONSISTENT_TOPIC_ID), the response's shape (an incremental session answers what changed),
client quotas and the leader's replication quota, and BytesOut."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData, encode_fetch_response
from tidelog.protocol.fetch_request import SessionlessFetch
from tidelog.protocol.kio_util import ms

from ..cluster.fetch_params import ClientMetadata, FetchParams, isolation_of
from ..context import RequestContext
from ..fetch_session import ZERO_UUID, FetchKey, FetchPlan, rotate_to_end
from ..quota.wiring import throttle_fetch
from ..replica_fetches import Read
from ..replication.quota import ReplicationQuotaManager
from ..security import AclOperation, ResourceType
from ..sendfile import close_chunks
from ..sessionless_fetches import SessionlessTopic, TopicRead, release

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
READ_COMMITTED = 1


def fetch_params(ctx: RequestContext, request: Any) -> FetchParams:
    """Who fetches and how (Kafka's FetchParams): a follower (v15's replica state, or
    replica_id, >= 0) with its broker epoch; a consumer at v11+ has client metadata (KIP-392:
    it may read from any replica, and names its rack); the request's byte limit capped by
    ``fetch.max.bytes``."""
    state = getattr(request, "replica_state", None)  # v15+ (a consumer's: id -1)
    replica_epoch = -1
    if state is not None and int(state.replica_id) >= 0:
        replica_id, replica_epoch = int(state.replica_id), int(state.replica_epoch)
    else:
        replica_id = -1 if state is not None else int(getattr(request, "replica_id", -1))
    meta = None
    if replica_id < 0 and ctx.api_version >= 11:
        meta = ClientMetadata(getattr(request, "rack_id", None), ctx.listener_name)
    budget = max(0, int(getattr(request, "max_bytes", 2**31 - 1)))
    budget = min(budget, int(ctx.broker.config.values["fetch.max.bytes"]))
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    return FetchParams(replica_id, replica_epoch, isolation_of(committed, replica_id >= 0),
                       ms(request.max_wait), request.min_bytes, budget, meta)


@dataclass(slots=True)
class _Precheck:
    """The handler's part of each partition, before the ReplicaManager reads it: READ on the
    topic before its existence (Kafka's handleFetchRequest), CLUSTER_ACTION for a follower,
    looked up once per topic; topic ids (v13+)."""

    ctx: RequestContext
    follower: bool
    by_id: bool
    allowed: dict[str, bool]

    def check(self, key: FetchKey) -> int:
        # an id unknown here has no name to authorize and stays UNKNOWN_TOPIC_ID below
        if not (self.by_id and key.unknown_id):
            ok = self.allowed.get(key.topic)
            if ok is None:
                ok = self._authorize(key.topic)
            if not ok:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if self.by_id:
            return _topic_id_error(self.ctx, key)
        return ErrorCode.NONE

    def _authorize(self, topic: str) -> bool:
        ctx = self.ctx
        ok = self.allowed[topic] = (
            ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
            if self.follower
            else ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic))
        return ok


def _leader_quota(ctx: RequestContext) -> ReplicationQuotaManager | None:
    """The leader's replication quota (leader.replication.throttled.*: replication/quota.py)."""
    replication = ctx.broker.replication
    quotas = replication.quotas if replication is not None else None
    return quotas.leader if quotas is not None else None


def _record_leader_throttled(ctx: RequestContext, read: Read) -> None:
    """The bytes sent for throttled partitions count against the leader's rate."""
    quota = _leader_quota(ctx)
    if quota is not None:
        quota.record(sum(_nbytes(d.records) for k, d in read if quota.is_throttled(k.tp)))


def _topic_id_error(ctx: RequestContext, key: FetchKey) -> ErrorCode:
    if key.unknown_id:
        return ErrorCode.UNKNOWN_TOPIC_ID
    topic = ctx.broker.metadata_cache.image.topic(key.topic)
    if topic is not None and topic.topic_id != key.topic_id:
        return ErrorCode.INCONSISTENT_TOPIC_ID
    return ErrorCode.NONE


def _resolver(ctx: RequestContext, follower: bool = False) -> Any:
    image = ctx.broker.metadata_cache.image
    rm = ctx.broker.replica_manager

    def resolve(topic_id: uuid.UUID) -> str | None:
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            return topic.name
        # a follower fetches a new topic as soon as its LeaderAndIsr is applied, maybe before
        # this leader's UpdateMetadata: the LeaderAndIsr that made this broker its leader
        # named the id (an UNKNOWN_TOPIC_ID would hold it back replica.fetch.backoff.ms)
        return rm.hosted_topic_name(topic_id) if follower else None

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


_PARAMS: dict[tuple[object, ...], FetchParams] = {}  # ``sessionless_params``' (bounded)
_PARAMS_MAX = 256


def sessionless_params(ctx: RequestContext, request: SessionlessFetch) -> FetchParams:
    """``fetch_params`` of a consumer's sessionless Fetch, the same (frozen) object for the
    same fields and listener: a consumer sends the same ones in every Fetch, and making
    FetchParams (a frozen dataclass: ``object.__setattr__`` per field) cost more than the
    lookup."""
    budget = min(max(0, request.max_bytes), int(ctx.broker.config.values["fetch.max.bytes"]))
    client = ctx.api_version >= 11  # (KIP-392: the consumer's rack and listener)
    key = (request.max_wait, request.min_bytes, budget, request.isolation_level, client,
           request.rack_id if client else None, ctx.listener_name if client else None)
    params = _PARAMS.get(key)
    if params is None:
        if len(_PARAMS) >= _PARAMS_MAX:
            _PARAMS.clear()
        params = _PARAMS[key] = fetch_params(ctx, request)
    return params


async def handle(ctx: RequestContext, request: Any) -> Any:
    if isinstance(request, SessionlessFetch):
        params = sessionless_params(ctx, request)
        if not (params.client_metadata is not None
                and ctx.broker.config.values["replica.selector.class"]):
            return await _handle_sessionless(ctx, request, params)
    else:
        params = fetch_params(ctx, request)
    follower = params.replica_id >= 0
    sessions = ctx.broker.fetch_sessions
    plan = sessions.plan(request, ctx.api_version, _resolver(ctx, follower), privileged=follower)
    if plan.error:
        return encode_fetch_response(
            ctx.correlation_id, ctx.api_version, [], error_code=plan.error, session_id=0
        )
    precheck = _Precheck(ctx, follower, plan.by_id, {})
    read = await ctx.broker.replica_manager.fetch_messages(
        params, plan.partitions, precheck.check, _leader_quota(ctx) if follower else None)
    if follower:
        _record_leader_throttled(ctx, read)
    try:
        topics = _shape(plan, read, plan.by_id)
    except BaseException:
        _release(read)
        raise
    if not follower:  # follower fetches are never throttled by client quotas
        size = sum(_nbytes(p.records) for _, parts in topics for p in parts)
        throttle_ms = throttle_fetch(ctx, size)
        if throttle_ms > 0:  # over consumer_byte_rate: answered empty, as Kafka
            _release(read)
            return encode_fetch_response(ctx.correlation_id, ctx.api_version, [],
                                         session_id=plan.response_session_id,
                                         throttle_time_ms=throttle_ms)
    _record_bytes_out(ctx, read, follower)
    sessions.record_answer(follower, sum(len(parts) for _, parts in topics))
    return encode_fetch_response(
        ctx.correlation_id, ctx.api_version, topics, session_id=plan.response_session_id
    )


async def _handle_sessionless(ctx: RequestContext, request: SessionlessFetch,
                              params: FetchParams) -> Any:
    """A consumer's sessionless Fetch in columns (server/sessionless_fetches.py): READ and
    the topic id checked once per topic, each partition with nothing new answered with the
    bytes its partition keeps; the response as ``handle`` shapes a sessionless one."""
    by_id = ctx.api_version >= 13
    resolve = _resolver(ctx)
    precheck = _Precheck(ctx, False, by_id, {})
    topics = []
    for t in request.topics:
        tid = t.topic_id if by_id and t.topic_id is not None else ZERO_UUID
        name = (resolve(tid) or "") if by_id else (t.topic or "")
        topics.append(SessionlessTopic(tid, name, t, precheck.check(FetchKey(tid, name, -1))))
    sessions = ctx.broker.fetch_sessions
    sessions.record_request(False, sum(t.columns.n for t in topics))
    read = await ctx.broker.replica_manager.fetch_sessionless(params, topics, ctx.api_version)
    throttle_ms = throttle_fetch(ctx, sum(_nbytes(d.records) for a in read
                                          for d in a.read.values()))
    if throttle_ms > 0:  # over consumer_byte_rate: answered empty, as Kafka
        release(read)
        return encode_fetch_response(ctx.correlation_id, ctx.api_version, [], session_id=0,
                                     throttle_time_ms=throttle_ms)
    _record_topics_out(ctx, topics, read)
    sessions.record_answer(False, sum(a.n for a in read))
    answer = [(t.topic_id if by_id else t.name, a.encoded())
              for t, a in zip(topics, read, strict=True)]
    return encode_fetch_response(ctx.correlation_id, ctx.api_version, answer, session_id=0)


def _record_topics_out(ctx: RequestContext, topics: list[SessionlessTopic],
                       read: list[TopicRead]) -> None:
    """``_record_bytes_out`` for a sessionless Fetch's topics (each named once)."""
    rm = ctx.broker.replica_manager
    stats = getattr(rm, "topic_stats", None)
    if stats is None:
        return
    for t, answer in zip(topics, read, strict=True):
        if t.name and rm.topic(t.name) is not None:
            size = sum(len(d.records) for d in answer.read.values() if d.records)
            failed = sum(1 for d in answer.read.values() if d.error_code)
            stats.record_fetch(t.name, size, failed, False, answer.n)


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
