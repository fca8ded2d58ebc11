"""OffsetDelete (key 47, KIP-496): drop committed offsets of topics the group no longer
consumes."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    tps = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    coord = coordinator_for(ctx.broker)
    err, per = coord.delete_offsets(request.group_id, tps)
    if err == ErrorCode.NONE:  # the tombstones answer once replicated
        err = await replicated(coord, request.group_id)
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    topics = (
        tuple(
            make(
                tcls,
                name=t.name,
                partitions=tuple(
                    make(
                        pcls,
                        partition_index=p.partition_index,
                        error_code=per.get(TopicPartition(t.name, p.partition_index), err),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
        if per
        else ()
    )
    return make(cls, throttle_time=0, error_code=err, topics=topics)
