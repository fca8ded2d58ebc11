"""ShareFetch (key 78), v1 (what librdkafka sends): a share group member's fetch through its
share session, with the acknowledgements of what it fetched before piggy-backed. Records are
acquired for ``group.share.record.lock.duration.ms``; the answer names the acquired ranges
and their delivery counts. Waits up to ``max_wait`` for records when none are available, and
no longer for a share-partition's state to be read from its share coordinator."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.cluster.partition import Partition
from tidelog.server.coordinator.group.share.coordinator import (
    FINAL_EPOCH,
    ShareGroupCoordinator,
    ShareSession,
)
from tidelog.server.coordinator.group.share.fetcher import Fetched, fetch_partition
from tidelog.server.errors import ApiError
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_group_heartbeat import share_for

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 1
# a fetch with nothing to acquire reads again this often until its max wait: parking until an
# append (Kafka's DelayedShareFetch) answers each record sent one by one in a ShareFetch,
# acknowledgement and state write of its own, and was measured slower (docs/operations.md)
POLL_S = 0.02

Slot = tuple[uuid.UUID, int]


def _names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in ctx.broker.replica_manager.topics()}


def _wait_ms(v: Any) -> int:
    return int(v.total_seconds() * 1000) if hasattr(v, "total_seconds") else int(v)


def acknowledge_all(ctx: RequestContext, share: ShareGroupCoordinator, group_id: str,
                    member_id: str, topics: Any, names: dict[uuid.UUID, str],
                    ) -> dict[Slot, ErrorCode]:
    """Apply every AcknowledgementBatch of the request; one error per partition."""
    out: dict[Slot, ErrorCode] = {}
    for t in topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            batches = [(int(b.first_offset), int(b.last_offset),
                        [int(x) for x in b.acknowledge_types])
                       for b in p.acknowledgement_batches]
            if not batches:
                continue
            slot = (t.topic_id, int(p.partition_index))
            if name is None:
                out[slot] = ErrorCode.UNKNOWN_TOPIC_ID
            elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                out[slot] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                out[slot] = share.acknowledge(group_id, member_id,
                                              TopicPartition(name, slot[1]), batches)
    return out


async def flush_acks(share: ShareGroupCoordinator, group_id: str, acks: dict[Slot, ErrorCode],
                     names: dict[uuid.UUID, str]) -> dict[Slot, ErrorCode]:
    """Answer acknowledgements once their share-partitions' state is stored (Kafka completes
    them after the persister's write): the write's error where it failed."""
    out = dict(acks)
    for slot, code in acks.items():
        name = names.get(slot[0])
        if code == ErrorCode.NONE and name is not None:
            out[slot] = await share.durable.flush((group_id, TopicPartition(name, slot[1])))
    return out


Prepared = tuple[ErrorCode, Partition | None]  # (NONE, None): its state is loading still


async def _prepare(ctx: RequestContext, share: ShareGroupCoordinator, group_id: str,
                   wanted: dict[Slot, TopicPartition], deadline: float,
                   failed: set[Slot]) -> dict[Slot, Prepared]:
    """The partitions this broker leads, with their share-partitions loaded. A load runs on
    its own (Kafka's SharePartition.maybeInitialize): it is waited for until ``deadline``
    only, so the ShareFetch answers by its max wait; one still loading then is left out (no
    error: the client fetches again), one that failed answers its error (its slot added to
    ``failed``: the fetch answers at once, the next load starts with the next fetch)."""
    out: dict[Slot, Prepared] = {}
    loads: dict[Slot, asyncio.Task[ErrorCode]] = {}
    for slot, tp in wanted.items():
        try:
            partition = ctx.broker.replica_manager.partition_or_error(tp)
        except ApiError as exc:
            out[slot] = (exc.code, None)
            continue
        out[slot] = (ErrorCode.NONE, partition)
        load = share.begin_load(group_id, tp, slot[0], partition.high_watermark,
                                int(partition.leader_epoch), partition.log_start_offset)
        if load is not None:
            loads[slot] = load
    if loads:
        await asyncio.wait(set(loads.values()), timeout=max(deadline - time.monotonic(), 0))
    for slot, load in loads.items():
        if not load.done() or load.cancelled():
            out[slot] = (ErrorCode.NONE, None)
        elif load.exception() is not None or load.result() != ErrorCode.NONE:
            err = ErrorCode.UNKNOWN_SERVER_ERROR if load.exception() else load.result()
            out[slot] = (err, None)
            failed.add(slot)
            share.load_answered(group_id, wanted[slot], load)
    return out


def _open(share: ShareGroupCoordinator, request: Any, session: ShareSession) -> bool:
    """The fetch's share session still the member's: not closed while the fetch waited."""
    return share.sessions.get((request.group_id or "", request.member_id or "")) is session


async def _fetch_all(ctx: RequestContext, share: ShareGroupCoordinator, request: Any,
                     session: ShareSession, names: dict[uuid.UUID, str],
                     deadline: float, failed: set[Slot]) -> dict[Slot, Fetched]:
    room = int(request.max_records) if int(request.max_records) > 0 else 500
    budget = int(request.max_bytes)
    out: dict[Slot, Fetched] = {}
    wanted: dict[Slot, TopicPartition] = {}
    for slot in sorted(session.partitions, key=lambda s: (str(s[0]), s[1])):
        name = names.get(slot[0])
        if name is None:
            out[slot] = Fetched(ErrorCode.UNKNOWN_TOPIC_ID)
        elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
            out[slot] = Fetched(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif budget > 0:  # unlike Fetch, no first batch regardless of max_bytes (Kafka)
            wanted[slot] = TopicPartition(name, slot[1])
    prepared = await _prepare(ctx, share, request.group_id, wanted, deadline, failed)
    if not _open(share, request, session):
        return out  # closed while the loads were waited for: nothing acquired for it
    for slot, tp in wanted.items():
        err, leader = prepared[slot]
        if err != ErrorCode.NONE or leader is None:
            out[slot] = Fetched(err)
            continue
        got = fetch_partition(share, leader, request.group_id, request.member_id, tp, slot[0],
                              room, budget)
        room -= sum(last - first + 1 for first, last, _ in got.acquired)
        budget -= len(got.records)
        out[slot] = got
    return out


def _response(ctx: RequestContext, share: ShareGroupCoordinator, group_id: str,
              error: ErrorCode, fetched: dict[Slot, Fetched],
              acks: dict[Slot, ErrorCode]) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partitions")
    lcls = nested(pcls, "current_leader")
    acls = nested(pcls, "acquired_records")
    ncls = nested(cls, "node_endpoints")
    node = ctx.broker.node_id
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for slot in sorted(set(fetched) | set(acks), key=lambda s: (str(s[0]), s[1])):
        f = fetched.get(slot, Fetched())
        if f.error == ErrorCode.NONE and not f.acquired and slot not in acks:
            continue
        by_topic.setdefault(slot[0], []).append(make(
            pcls, partition_index=slot[1], error_code=f.error,
            acknowledge_error_code=acks.get(slot, ErrorCode.NONE),
            current_leader=make(lcls, leader_id=node, leader_epoch=0),
            records=f.records,
            acquired_records=tuple(make(acls, first_offset=a, last_offset=b, delivery_count=c)
                                   for a, b, c in f.acquired)))
    host, port = ctx.endpoint
    return make(cls, throttle_time=0, error_code=error,
                acquisition_lock_timeout=share.settings.number(
                    group_id, "share.record.lock.duration.ms"),
                responses=tuple(make(tcls, topic_id=t, partitions=tuple(ps))
                                for t, ps in by_topic.items()),
                node_endpoints=(make(ncls, node_id=node, host=host, port=port),))


async def handle(ctx: RequestContext, request: Any) -> Any:
    share = share_for(ctx)
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _response(ctx, share, group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, {})
    epoch = int(request.share_session_epoch)
    err, session = share.session(group_id, member_id, epoch)
    if err != ErrorCode.NONE or session is None:
        return _response(ctx, share, group_id, err, {}, {})
    names = _names(ctx)
    acks = acknowledge_all(ctx, share, group_id, member_id, request.topics, names)
    acks = await flush_acks(share, group_id, acks, names)
    if epoch == FINAL_EPOCH:
        share.close_session(group_id, member_id, by_client=True)
        return _response(ctx, share, group_id, ErrorCode.NONE, {}, acks)
    session.partitions.update((t.topic_id, int(p.partition_index))
                              for t in request.topics for p in t.partitions)
    for t in request.forgotten_topics_data:
        session.partitions.difference_update((t.topic_id, int(p)) for p in t.partitions)
    deadline = time.monotonic() + _wait_ms(request.max_wait) / 1000
    failed: set[Slot] = set()  # share-partitions whose state could not be read
    while True:
        if not _open(share, request, session):
            # closed while this fetch waited (a final ShareAcknowledge read after it on this
            # connection, the member gone): nothing is acquired for a session that ended,
            # as Kafka, which reads a connection's next request only after this answer
            return _response(ctx, share, group_id, ErrorCode.NONE, {}, acks)
        fetched = await _fetch_all(ctx, share, request, session, names, deadline, failed)
        done = failed or time.monotonic() >= deadline
        if done or any(f.acquired for f in fetched.values()):
            return _response(ctx, share, group_id, ErrorCode.NONE, fetched, acks)
        await asyncio.sleep(min(POLL_S, max(deadline - time.monotonic(), 0)))
