"""ShareGroupHeartbeat (key 76), v1 (what librdkafka sends): KIP-932 share group membership.
Every member is assigned every partition of the topics it subscribes to."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator, ShareHeartbeat
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .consumer_group_heartbeat import group_configs_for, topic_source

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def share_for(ctx: RequestContext) -> ShareGroupCoordinator:
    """The share groups' side of the group coordinator, with the broker's topics and group
    configs."""
    coord = coordinator_for(ctx.broker)
    group_configs_for(ctx.broker)
    coord.share.topics = topic_source(ctx.broker.replica_manager)
    return coord.share


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return make(cls, throttle_time=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    member_epoch=0, heartbeat_interval=0)
    share = share_for(ctx)
    names = request.subscribed_topic_names
    r = share.heartbeat(ShareHeartbeat(
        request.group_id, request.member_id, int(request.member_epoch),
        None if names is None else tuple(names), request.rack_id, ctx.client_id or "",
        "/" + ctx.client_host))
    if r.error != ErrorCode.NONE:
        return make(cls, throttle_time=0, error_code=r.error, error_message=r.message,
                    member_id=None, member_epoch=0, heartbeat_interval=0)
    assignment = None
    if r.assignment is not None:
        acls = nested(cls, "assignment")
        tcls = nested(acls, "topic_partitions")
        assignment = make(acls, topic_partitions=tuple(
            make(tcls, topic_id=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))))
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE, member_id=r.member_id,
                member_epoch=r.member_epoch, heartbeat_interval=r.heartbeat_interval_ms,
                assignment=assignment)
