"""Metadata (key 3): the brokers, the controller and every partition's registration (leader,
leader epoch, replicas, ISR, offline replicas) from the metadata image, read once per
request; topics with a stable topic_id (v10+), auto-creation when allowed by both the request
and the broker, authorized operations when asked (topic v8+, cluster v8-v10: KIP-700 moved
the cluster's to DescribeCluster), the top-level error code of v13 (always NONE: no
rebootstrap needed)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import has_field, make, nested
from tidelog.util.topic_partition import validate_topic_name

from ..context import RequestContext
from ..metadata.image import NO_LEADER, MetadataImage, PartitionRegistration, TopicImage
from ..replica_manager import INTERNAL_TOPICS
from ..security import AclOperation, ResourceType

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13
_NO_ID = uuid.UUID(int=0)
OPERATIONS_OMITTED = -2147483648  # Kafka's "not included" (Integer.MIN_VALUE)


def _requested(
    ctx: RequestContext, request: Any
) -> tuple[list[tuple[str | None, uuid.UUID | None]], bool]:
    """(names or ids asked for, all_topics)."""
    topics = request.topics
    if topics is None or (ctx.api_version == 0 and not topics):
        return [], True
    out: list[tuple[str | None, uuid.UUID | None]] = []
    for t in topics:
        tid = getattr(t, "topic_id", None)
        out.append((t.name, tid if tid and tid != _NO_ID else None))
    return out, False


def _topic(
    cls: Any,
    topic: TopicImage | None,
    name: str | None,
    err: int = 0,
    tid: uuid.UUID | None = None,
    live: Collection[int] = (),
) -> Any:
    pcls = nested(cls, "partitions")
    parts: tuple[Any, ...] = ()
    if topic is not None:
        parts = tuple(_partition(pcls, p, reg, live) for p, reg in sorted(topic.partitions.items()))
    return make(
        cls,
        error_code=err,
        name=name,
        topic_id=topic.topic_id if topic else (tid or _NO_ID),
        is_internal=bool(name in INTERNAL_TOPICS),
        partitions=parts,
        topic_authorized_operations=OPERATIONS_OMITTED,
    )


def _with_operations(ctx: RequestContext, topic: Any) -> Any:
    """Kafka answers every topic of the response, errors included, when asked."""
    ops = ctx.authorized_operations(ResourceType.TOPIC, topic.name or "")
    return dataclasses.replace(topic, topic_authorized_operations=ops)


def _partition(pcls: Any, p: int, reg: PartitionRegistration, live: Collection[int]) -> Any:
    """A partition without a leader, or whose leader is not a live broker in the image,
    answers LEADER_NOT_AVAILABLE and leader -1, its replicas as registered (Kafka's
    ZkMetadataCache.getPartitionMetadata)."""
    leader = reg.leader if reg.leader in live else NO_LEADER
    return make(
        pcls,
        error_code=0 if leader != NO_LEADER else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=p,
        leader_id=leader,
        leader_epoch=reg.leader_epoch,
        replica_nodes=reg.replicas,
        isr_nodes=reg.isr,
        offline_replicas=reg.offline_replicas,
    )


async def _named_topic(ctx: RequestContext, image: MetadataImage, tcls: Any,
                       name: str | None, tid: Any, auto: bool) -> Any:
    """One requested topic's entry, in Kafka's order of checks: DESCRIBE, existence, then
    auto-creation (a valid name, CREATE on the cluster or the topic)."""
    topic = image.topic_by_id(tid) if tid is not None else image.topic(name or "")
    shown = topic.name if topic is not None else name
    if shown and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, shown):
        # before existence: a forbidden topic looks like a forbidden missing one
        return _topic(tcls, None, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, tid)
    if topic is None and tid is not None:
        return _topic(tcls, None, None, ErrorCode.UNKNOWN_TOPIC_ID, tid)
    if topic is None and name and auto:
        try:
            validate_topic_name(name)
        except ValueError:
            return _topic(tcls, None, name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
            return _topic(tcls, None, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if await ctx.broker.admin_manager.auto_create(name) is not None:
            # created (file work off the loop): the image now shows it
            topic = ctx.broker.metadata_cache.image.topic(name)
        else:  # not allowed, or being created by another request (the client retries)
            return _topic(tcls, None, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic is None:
        return _topic(tcls, None, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _topic(tcls, topic, topic.name, live=image.brokers)


def _brokers(ctx: RequestContext, image: MetadataImage, bcls: Any) -> tuple[Any, ...]:
    """Every live broker with an endpoint on the client's listener (Kafka leaves out those
    without one); this broker's own endpoint is the one the request came in on."""
    out = []
    for b in image.brokers.values():
        ep = ctx.endpoint if b.broker_id == ctx.broker.node_id \
            else b.endpoint(ctx.listener_name)
        if ep is not None:
            out.append(make(bcls, node_id=b.broker_id, host=ep[0], port=ep[1], rack=b.rack))
    return tuple(out)


async def handle(ctx: RequestContext, request: Any) -> Any:
    image = ctx.broker.metadata_cache.image
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    wanted, all_topics = _requested(ctx, request)
    auto = ctx.api_version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
    topics: list[Any] = []
    if all_topics:
        topics = [
            _topic(tcls, t, t.name, live=image.brokers)
            for t in image.topics.values()
            # Kafka leaves out the topics the principal may not DESCRIBE
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        ]
    for name, tid in wanted:
        topics.append(await _named_topic(ctx, image, tcls, name, tid, auto))
    if getattr(request, "include_topic_authorized_operations", False):
        topics = [_with_operations(ctx, t) for t in topics]
    kw: dict[str, Any] = {}
    if has_field(cls, "cluster_authorized_operations"):
        kw["cluster_authorized_operations"] = (
            ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
            if getattr(request, "include_cluster_authorized_operations", False)
            else OPERATIONS_OMITTED
        )
    return make(
        cls,
        throttle_time=0,
        brokers=_brokers(ctx, image, nested(cls, "brokers")),
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        topics=tuple(topics),
        error_code=0,
        **kw,
    )
