"""DeleteShareGroupOffsets (key 92), v0: forget a share group's state for whole topics (Kafka's
kafka-share-groups.sh --delete-offsets); the next fetch starts them afresh per
share.auto.offset.reset. The group must have no members."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_group_heartbeat import share_for

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "responses")
    share = share_for(ctx)
    rm = ctx.broker.replica_manager
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        err = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        err = share.empty_group_error(request.group_id)
    out = []
    for t in request.topics:
        info = rm.topic(t.topic_name)
        code = err
        if code != ErrorCode.NONE:
            pass
        elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            for p in range(info.partitions):
                got = await share.forget(request.group_id, info.topic_id, p)
                code = got if code == ErrorCode.NONE else code
        out.append(make(tcls, topic_name=t.topic_name,
                        topic_id=info.topic_id if info is not None else None, error_code=code))
    return make(cls, throttle_time=0, error_code=err, responses=tuple(out))
