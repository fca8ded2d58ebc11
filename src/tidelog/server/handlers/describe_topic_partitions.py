"""DescribeTopicPartitions (key 75, Kafka 3.7+; what a 4.x AdminClient's describeTopics
sends): topics in name order, at most ``response_partition_limit`` partitions per response
(capped by ``max.request.partition.size.limit``, Kafka's default 2000), a cursor naming the
first partition not yet sent. Every topic carries its authorized operations, as Kafka's
DescribeTopicPartitionsRequestHandler does. No topics asked = every topic this principal may
describe."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..metadata.image import NO_LEADER, MetadataImage, TopicImage
from ..replica_manager import INTERNAL_TOPICS
from ..security import AclOperation, ResourceType

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0
PARTITION_LIMIT_CAP = 2000  # max.request.partition.size.limit


def _partitions(cls: Any, topic: TopicImage, first: int, last: int) -> tuple[Any, ...]:
    pcls = nested(cls, "partitions")
    out = []
    for p in range(first, last):
        reg = topic.partitions[p]
        out.append(make(
            pcls, error_code=0 if reg.leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
            replica_nodes=reg.replicas, isr_nodes=reg.isr, eligible_leader_replicas=None,
            last_known_elr=None, offline_replicas=reg.offline_replicas))
    return tuple(out)


def _error_topic(ctx: RequestContext, cls: Any, name: str, code: ErrorCode) -> Any:
    return make(cls, error_code=code, name=name, topic_id=None, partitions=(),
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name))


def _wanted(ctx: RequestContext, image: MetadataImage,
            request: Any) -> list[tuple[str, TopicImage | None]]:
    if request.topics:
        names = sorted({t.name for t in request.topics})
        return [(n, image.topic(n)) for n in names]
    return [(name, t) for name, t in sorted(image.topics.items())
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)]


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    image = ctx.broker.metadata_cache.image
    budget = max(1, min(int(request.response_partition_limit), PARTITION_LIMIT_CAP))
    cursor = request.cursor
    out: list[Any] = []
    next_cursor: tuple[str, int] | None = None
    for name, info in _wanted(ctx, image, request):
        if cursor is not None and name < cursor.topic_name:
            continue  # before the cursor: sent in an earlier page
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            out.append(_error_topic(ctx, tcls, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if info is None:
            out.append(_error_topic(ctx, tcls, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if budget == 0:
            next_cursor = (name, first)
            break
        count = len(info.partitions)
        last = min(count, first + budget)
        budget -= last - first
        out.append(make(
            tcls, error_code=0, name=name, topic_id=info.topic_id,
            is_internal=name in INTERNAL_TOPICS, partitions=_partitions(tcls, info, first, last),
            topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name)))
        if last < count:
            next_cursor = (name, last)
            break
    ccls = nested(cls, "next_cursor")
    return make(cls, throttle_time=0, topics=tuple(out), next_cursor=(
        None if next_cursor is None
        else make(ccls, topic_name=next_cursor[0], partition_index=next_cursor[1])))
