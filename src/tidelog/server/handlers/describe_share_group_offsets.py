"""DescribeShareGroupOffsets (key 90), v0-1: each share-partition's start offset (SPSO) and,
from v1, its lag (records from the SPSO to the high watermark not yet acknowledged or
archived); a partition the group has no state for answers -1."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.group.share.coordinator import ShareGroupCoordinator
from tidelog.server.group.share.partition import RecordState
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_group_heartbeat import share_for

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1
DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _partition(ctx: RequestContext, share: ShareGroupCoordinator, pcls: type, group_id: str,
               tp: TopicPartition) -> Any:
    sp = share.share_partition_if_known(group_id, tp)
    if sp is None:
        return make(pcls, partition_index=tp.partition, start_offset=-1, leader_epoch=-1,
                    lag=-1, error_code=ErrorCode.NONE)
    lg = ctx.broker.replica_manager.get_log(tp)
    hw = int(lg.high_watermark) if lg is not None else sp.start_offset
    settled = sum(1 for o, r in sp.records.items() if o < hw and r.state in DONE)
    return make(pcls, partition_index=tp.partition, start_offset=sp.start_offset,
                leader_epoch=0, lag=max(hw - sp.start_offset - settled, 0),
                error_code=ErrorCode.NONE)


def _group(ctx: RequestContext, share: ShareGroupCoordinator, gcls: type, g: Any) -> Any:
    tcls = nested(gcls, "topics")
    pcls = nested(tcls, "partitions")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
        return make(gcls, group_id=g.group_id, topics=(),
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    err = share.group_error(g.group_id)
    if err != ErrorCode.NONE:
        return make(gcls, group_id=g.group_id, topics=(), error_code=err)
    ids = {t.name: t.topic_id for t in ctx.broker.replica_manager.topics()}
    if g.topics is None:  # every share-partition the group has
        wanted: dict[str, list[int]] = {}
        names = {tid: name for name, tid in ids.items()}
        for gid, tp in share.partitions:
            if gid == g.group_id:
                wanted.setdefault(tp.topic, []).append(tp.partition)
        for gid, tid, p in share.restored:  # stored, not fetched since the restart
            if gid == g.group_id and tid in names:
                wanted.setdefault(names[tid], []).append(p)
    else:
        wanted = {t.topic_name: list(t.partitions) for t in g.topics}
    topics = []
    for name, parts in sorted(wanted.items()):
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            continue
        topics.append(make(tcls, topic_name=name, topic_id=ids.get(name),
                           partitions=tuple(_partition(ctx, share, pcls, g.group_id,
                                                       TopicPartition(name, p))
                                            for p in sorted(parts))))
    return make(gcls, group_id=g.group_id, topics=tuple(topics), error_code=ErrorCode.NONE)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    share = share_for(ctx)
    return make(cls, throttle_time=0,
                groups=tuple(_group(ctx, share, gcls, g) for g in request.groups))
