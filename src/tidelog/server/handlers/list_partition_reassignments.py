"""ListPartitionReassignments (key 46). In a cluster the controller lists the partitions
moving now, each with its replicas (target first), adding and removing replicas (Kafka's
processListPartitionReassignments; a null topic list means every moving partition); a
broker that is not the controller answers NOT_CONTROLLER. On one broker a reassignment
completes at once, so none is ever in progress: the answer lists nothing. Needs DESCRIBE on
the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def _listed(ctx: RequestContext, cls: Any, request: Any) -> Any:
    cluster = ctx.broker.cluster
    assert cluster is not None
    asked: list[TopicPartition] | None = None
    if request.topics is not None:
        asked = [TopicPartition(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    found = await cluster.controller.list_partition_reassignments(asked)
    if found is None:
        return make(cls, throttle_time=0, error_code=ErrorCode.NOT_CONTROLLER, error_message=None,
                    topics=())
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for tp, a in sorted(found.items()):
        by_topic.setdefault(tp.topic, []).append(make(
            pcls, partition_index=tp.partition, replicas=a.replicas,
            adding_replicas=a.adding_replicas, removing_replicas=a.removing_replicas))
    topics = tuple(make(tcls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE, error_message=None, topics=topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    code = ErrorCode.NONE
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif ctx.broker.cluster is not None:
        return await _listed(ctx, cls, request)
    return make(cls, throttle_time=0, error_code=code, error_message=None, topics=())
