"""ShareAcknowledge (key 79), v1: a share group member accepts, releases or rejects records
it acquired, outside a fetch (through its share session; epoch -1 also closes it)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.share.coordinator import FINAL_EPOCH

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_fetch import acknowledge_all, flush_acks
from .share_group_heartbeat import share_for

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 1


def _response(ctx: RequestContext, error: ErrorCode,
              acks: dict[tuple[uuid.UUID, int], ErrorCode]) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partitions")
    lcls = nested(pcls, "current_leader")
    ncls = nested(cls, "node_endpoints")
    node = ctx.broker.node_id
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), code in sorted(acks.items(), key=lambda kv: (str(kv[0][0]),
                                                                             kv[0][1])):
        by_topic.setdefault(topic_id, []).append(make(
            pcls, partition_index=partition, error_code=code,
            current_leader=make(lcls, leader_id=node, leader_epoch=0)))
    host, port = ctx.endpoint
    return make(cls, throttle_time=0, error_code=error,
                responses=tuple(make(tcls, topic_id=t, partitions=tuple(ps))
                                for t, ps in by_topic.items()),
                node_endpoints=(make(ncls, node_id=node, host=host, port=port),))


async def handle(ctx: RequestContext, request: Any) -> Any:
    share = share_for(ctx)
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _response(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED, {})
    epoch = int(request.share_session_epoch)
    if epoch == 0:  # acknowledging needs a session with records in it
        return _response(ctx, ErrorCode.INVALID_SHARE_SESSION_EPOCH, {})
    err, session = share.session(group_id, member_id, epoch)
    if err != ErrorCode.NONE or session is None:
        return _response(ctx, err, {})
    names = {t.topic_id: t.name for t in ctx.broker.replica_manager.topics()}
    acks = await flush_acks(share, group_id,
                            acknowledge_all(ctx, share, group_id, member_id, request.topics,
                                            names), names)
    if epoch == FINAL_EPOCH:
        share.close_session(group_id, member_id, by_client=True)
    return _response(ctx, ErrorCode.NONE, acks)
