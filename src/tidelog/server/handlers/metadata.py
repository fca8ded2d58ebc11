"""Metadata (key 3): one broker (this one, also the controller), topics with a stable
topic_id (v10+), auto-creation when allowed by both the request and the broker, authorized
operations when asked (topic v8+, cluster v8-v10: KIP-700 moved the cluster's to
DescribeCluster), the top-level error code of v13 (always NONE: no rebootstrap needed)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import has_field, make, nested
from tidelog.util.topic_partition import validate_topic_name

from .. import topic_admin
from ..context import RequestContext
from ..metadata_store import TopicInfo
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
    info: TopicInfo | None,
    name: str | None,
    node: int,
    err: int = 0,
    tid: uuid.UUID | None = None,
    offline: frozenset[int] = frozenset(),
) -> Any:
    pcls = nested(cls, "partitions")
    parts: tuple[Any, ...] = ()
    if info is not None:
        parts = tuple(_partition(pcls, p, node, p in offline) for p in range(info.partitions))
    return make(
        cls,
        error_code=err,
        name=name,
        topic_id=info.topic_id if info else (tid or _NO_ID),
        is_internal=bool(name in INTERNAL_TOPICS),
        partitions=parts,
        topic_authorized_operations=OPERATIONS_OMITTED,
    )


def _with_operations(ctx: RequestContext, topic: Any) -> Any:
    """Kafka answers every topic of the response, errors included, when asked."""
    ops = ctx.authorized_operations(ResourceType.TOPIC, topic.name or "")
    return dataclasses.replace(topic, topic_authorized_operations=ops)


def _partition(pcls: Any, p: int, node: int, offline: bool) -> Any:
    """A partition whose log dir failed has no leader and its only replica offline, as
    Kafka's controller reports it once the broker's dir is offline."""
    if offline:
        return make(
            pcls,
            error_code=ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p,
            leader_id=-1,
            leader_epoch=0,
            replica_nodes=(node,),
            isr_nodes=(),
            offline_replicas=(node,),
        )
    return make(
        pcls,
        error_code=0,
        partition_index=p,
        leader_id=node,
        leader_epoch=0,
        replica_nodes=(node,),
        isr_nodes=(node,),
        offline_replicas=(),
    )


async def _named_topic(ctx: RequestContext, tcls: Any, name: str | None, tid: Any,
                       auto: bool) -> Any:
    """One requested topic's entry, in Kafka's order of checks: DESCRIBE, existence, then
    auto-creation (a valid name, CREATE on the cluster or the topic)."""
    rm, node = ctx.broker.replica_manager, ctx.broker.node_id
    info = rm.store.topic_by_id(tid) if tid is not None else rm.topic(name or "")
    shown = info.name if info is not None else name
    if shown and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, shown):
        # before existence: a forbidden topic looks like a forbidden missing one
        return _topic(tcls, None, name, node, ErrorCode.TOPIC_AUTHORIZATION_FAILED, tid)
    if info is None and tid is not None:
        return _topic(tcls, None, None, node, ErrorCode.UNKNOWN_TOPIC_ID, tid)
    if info is None and name and auto:
        try:
            validate_topic_name(name)
        except ValueError:
            return _topic(tcls, None, name, node, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if not (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
                or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)):
            return _topic(tcls, None, name, node, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        info = await topic_admin.auto_create(rm, name)  # file work off the loop
    if info is None:
        return _topic(tcls, None, name, node, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _topic(tcls, info, info.name, node, offline=rm.offline_partitions(info.name))


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    rm = broker.replica_manager
    node = broker.node_id
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    bcls = nested(cls, "brokers")
    wanted, all_topics = _requested(ctx, request)
    auto = ctx.api_version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
    topics: list[Any] = []
    if all_topics:
        topics = [
            _topic(tcls, info, info.name, node, offline=rm.offline_partitions(info.name))
            for info in rm.topics()
            # Kafka leaves out the topics the principal may not DESCRIBE
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name)
        ]
    for name, tid in wanted:
        topics.append(await _named_topic(ctx, tcls, name, tid, auto))
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
        brokers=(
            make(
                bcls,
                node_id=node,
                host=ctx.endpoint[0],
                port=ctx.endpoint[1],
                rack=None,
            ),
        ),
        cluster_id=rm.cluster_id,
        controller_id=node,
        topics=tuple(topics),
        error_code=0,
        **kw,
    )
