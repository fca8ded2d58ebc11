"""DescribeShareGroupOffsets (key 90), v0-1: each share-partition's start offset (SPSO) and,
from v1, its lag (records from the SPSO to the high watermark not yet acknowledged or
archived); a partition the group has no state for answers -1."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator
from tidelog.server.coordinator.group.share.partition import RecordState
from tidelog.server.coordinator.share.records import ShareState
from tidelog.server.coordinator.share.uncommitted import StateKey
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_group_heartbeat import share_for

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1
DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


async def _partition(ctx: RequestContext, share: ShareGroupCoordinator, pcls: type,
                     group_id: str, tp: TopicPartition, topic_id: uuid.UUID | None) -> Any:
    """From the share-partition when it is led here, else from its stored state (the
    share coordinator here, or ReadShareGroupStateSummary through the persister)."""
    partition = ctx.broker.replica_manager.get_partition(tp)
    hw = partition.high_watermark if partition is not None else -1
    sp = share.partitions.get((group_id, tp))
    start, settled = -1, 0
    if sp is not None:
        start = sp.start_offset
        settled = sum(1 for o, r in sp.records.items() if o < hw and r.state in DONE)
    elif topic_id is not None:
        state = await _stored(share, (group_id, topic_id, tp.partition))
        if state is not None:
            start = state.start_offset
            settled = sum(max(min(b, hw - 1) - max(a, start) + 1, 0)
                          for a, b, kind, _ in state.batches if kind in (2, 4))
    if start < 0:
        return make(pcls, partition_index=tp.partition, start_offset=-1, leader_epoch=-1,
                    lag=-1, error_code=ErrorCode.NONE)
    lag = max(hw - start - settled, 0) if hw >= 0 else -1
    return make(pcls, partition_index=tp.partition, start_offset=start, leader_epoch=0,
                lag=lag, error_code=ErrorCode.NONE)


async def _stored(share: ShareGroupCoordinator, key: StateKey) -> ShareState | None:
    local = share.state_coordinator
    if local is not None and local.key_error(key) == ErrorCode.NONE:
        return local.states.get(key)
    if share.durable.persister is None:
        return None
    r = await share.durable.persister.summary(key)
    if r.state is None or r.state.start_offset < 0:
        return None
    return r.state


def _known(share: ShareGroupCoordinator, group_id: str,
           names: dict[uuid.UUID, str]) -> dict[str, set[int]]:
    """Every share-partition of the group this broker knows of: led here, stored here, or
    of a topic its members subscribe to."""
    wanted: dict[str, set[int]] = {}
    for gid, tp in share.partitions:
        if gid == group_id:
            wanted.setdefault(tp.topic, set()).add(tp.partition)
    if share.state_coordinator is not None:
        for _, tid, p in share.state_coordinator.keys_of_group(group_id):
            if tid in names:
                wanted.setdefault(names[tid], set()).add(p)
    group = share.groups.get(group_id)
    topics = share.topics()
    for member in group.members.values() if group is not None else ():
        for name in member.subscribed_topic_names:
            if name in topics:
                wanted.setdefault(name, set()).update(range(topics[name].num_partitions))
    return wanted


async def _group(ctx: RequestContext, share: ShareGroupCoordinator, gcls: type,
                 g: Any) -> Any:
    tcls = nested(gcls, "topics")
    pcls = nested(tcls, "partitions")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
        return make(gcls, group_id=g.group_id, topics=(),
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    err = share.group_error(g.group_id)
    if err != ErrorCode.NONE:
        return make(gcls, group_id=g.group_id, topics=(), error_code=err)
    ids = {t.name: t.topic_id for t in ctx.broker.replica_manager.topics()}
    every = g.topics is None
    wanted = _known(share, g.group_id, {tid: name for name, tid in ids.items()}) if every \
        else {t.topic_name: set(t.partitions) for t in g.topics}
    topics = []
    for name, parts in sorted(wanted.items()):
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            continue
        rows = [await _partition(ctx, share, pcls, g.group_id, TopicPartition(name, p),
                                 ids.get(name)) for p in sorted(parts)]
        if every:
            rows = [r for r in rows if r.start_offset >= 0]
        if rows or not every:
            topics.append(make(tcls, topic_name=name, topic_id=ids.get(name),
                               partitions=tuple(rows)))
    return make(gcls, group_id=g.group_id, topics=tuple(topics), error_code=ErrorCode.NONE)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    share = share_for(ctx)
    return make(cls, throttle_time=0,
                groups=tuple([await _group(ctx, share, gcls, g) for g in request.groups]))
