"""DeleteRecords (key 21): advance the log start offset (-1 means the high watermark)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import ApiError, to_error
from ..security import AclOperation, ResourceType

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    rm = ctx.broker.replica_manager
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            low, code = -1, ErrorCode.NONE
            try:
                tp = TopicPartition(t.name, p.partition_index)
                if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name):
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                lg = rm.partition_or_error(tp).log
                offset = lg.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > lg.high_watermark:
                    raise ApiError(ErrorCode.OFFSET_OUT_OF_RANGE)
                low = rm.delete_records(tp, offset)
            except Exception as exc:
                code, _ = to_error(exc)
            parts.append(
                make(pcls, partition_index=p.partition_index, low_watermark=low, error_code=code)
            )
        topics.append(make(tcls, name=t.name, partitions=tuple(parts)))
    return make(cls, throttle_time=0, topics=tuple(topics))
