"""DeleteRecords (key 21): advance the leader's log start offset (-1 means the high
watermark), then answer once every live replica's log start offset passed it (Kafka's
DelayedDeleteRecords; at once on one broker) with the low watermark, or REQUEST_TIMED_OUT
after the request's timeout."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested
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
    results: list[tuple[str, list[tuple[TopicPartition, int, int]]]] = []
    pending: dict[TopicPartition, int] = {}
    for t in request.topics:
        parts: list[tuple[TopicPartition, int, int]] = []
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            low, code = -1, int(ErrorCode.NONE)
            try:
                if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, t.name):
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                pending[tp] = rm.delete_records(tp, p.offset)
            except Exception as exc:
                code, _ = to_error(exc)
            parts.append((tp, low, code))
        results.append((t.name, parts))
    outcome = await rm.wait_low_watermark(pending, ms(request.timeout)) if pending else {}
    topics = []
    for name, parts in results:
        out = []
        for tp, low, code in parts:
            if tp in pending:
                code = int(outcome.get(tp, ErrorCode.NONE))
                low = _low_watermark(ctx, tp) if code == ErrorCode.NONE else -1
            out.append(make(pcls, partition_index=tp.partition, low_watermark=low,
                            error_code=code))
        topics.append(make(tcls, name=name, partitions=tuple(out)))
    return make(cls, throttle_time=0, topics=tuple(topics))


def _low_watermark(ctx: RequestContext, tp: TopicPartition) -> int:
    try:
        return ctx.broker.replica_manager.low_watermark(tp)
    except ApiError:
        return -1
