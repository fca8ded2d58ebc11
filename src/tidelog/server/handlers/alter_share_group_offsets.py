"""AlterShareGroupOffsets (key 91), v0: start a share group's share-partitions over at given
offsets (Kafka's kafka-share-groups.sh --reset-offsets). The group must have no members."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .share_group_heartbeat import share_for

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partitions")
    share = share_for(ctx)
    rm = ctx.broker.replica_manager
    err = ErrorCode.NONE
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        err = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        err = share.empty_group_error(request.group_id)
    topics = []
    for t in request.topics:
        info = rm.topic(t.topic_name)
        parts = []
        for p in t.partitions:
            code = err
            if code != ErrorCode.NONE:
                pass
            elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.topic_name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                code = ErrorCode.INVALID_REQUEST
            else:
                code = await share.alter_start(request.group_id, info.topic_id,
                                               int(p.partition_index), int(p.start_offset))
            parts.append(make(pcls, partition_index=p.partition_index, error_code=code))
        topics.append(make(tcls, topic_name=t.topic_name,
                           topic_id=info.topic_id if info is not None else None,
                           partitions=tuple(parts)))
    return make(cls, throttle_time=0, error_code=err, responses=tuple(topics))
