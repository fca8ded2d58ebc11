"""AlterPartitionReassignments (key 45). In a cluster the controller moves the partitions
(Kafka's processApiPartitionReassignment: null replicas cancel a move in progress); a
broker that is not the controller answers NOT_CONTROLLER (clients ask the controller).
With v1's allow_replication_factor_change false a target of another size than the current
one is INVALID_REPLICATION_FACTOR. One broker can only hold each partition's single
replica itself, so a reassignment onto exactly this broker is a no-op completed at once
(NONE), a cancellation finds nothing in progress (NO_REASSIGNMENT_IN_PROGRESS), a different
replica count is INVALID_REPLICATION_FACTOR (v1's allow_replication_factor_change only lets
it reach the broker check), and any other broker or a duplicate is
INVALID_REPLICA_ASSIGNMENT, as Kafka's controller answers. Needs ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


def _check(
    ctx: RequestContext, topic: str, partition: int, replicas: Any, allow_rf_change: bool
) -> tuple[ErrorCode, str | None]:
    info = ctx.broker.replica_manager.topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment for this partition."
    wanted = [int(r) for r in replicas]
    node = ctx.broker.node_id
    if not wanted or len(set(wanted)) != len(wanted):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica list {wanted}."
    if len(wanted) != 1 and not allow_rf_change:
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            f"The replication factor is changed from 1 to {len(wanted)}")
    strangers = [r for r in wanted if r != node]
    if strangers:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
            f"The manual partition assignment includes broker {strangers[0]}, which is not "
            "registered.")
    return ErrorCode.NONE, None


Results = dict[TopicPartition, tuple[int, str | None]]


async def _cluster(ctx: RequestContext, request: Any, allow_rf_change: bool) -> Results | None:
    """The controller's answers; None when this broker is not the controller."""
    from ..controller.reassignment import target_replicas  # a cluster's: with the controller

    cluster = ctx.broker.cluster
    assert cluster is not None
    controller = cluster.controller
    if not controller.is_active:
        return None
    out: Results = {}
    asked: dict[TopicPartition, tuple[int, ...] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            wanted = None if p.replicas is None else tuple(int(r) for r in p.replicas)
            current = controller.context.assignments.get(tp)
            if wanted is not None and current is not None and not allow_rf_change \
                    and len(wanted) != len(target_replicas(current)):
                out[tp] = (int(ErrorCode.INVALID_REPLICATION_FACTOR),
                           f"The replication factor is changed from "
                           f"{len(target_replicas(current))} to {len(wanted)}")
            else:
                asked[tp] = wanted
    answered = await controller.alter_partition_reassignments(asked)
    if answered is None:
        return None
    return out | answered


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partitions")
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    if allowed and ctx.broker.cluster is not None:
        results = await _cluster(ctx, request, allow_rf_change)
        if results is None:
            return make(cls, throttle_time=0, allow_replication_factor_change=allow_rf_change,
                        error_code=ErrorCode.NOT_CONTROLLER, error_message=None, responses=())
        by_topic: dict[str, list[Any]] = {}
        for tp, (code, msg) in results.items():
            by_topic.setdefault(tp.topic, []).append(make(
                pcls, partition_index=tp.partition, error_code=code, error_message=msg))
        out = [make(tcls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()]
        return make(cls, throttle_time=0, allow_replication_factor_change=allow_rf_change,
                    error_code=ErrorCode.NONE, error_message=None, responses=tuple(out))
    out = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, msg = (
                _check(ctx, t.name, int(p.partition_index), p.replicas, allow_rf_change)
                if allowed
                else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            )
            parts.append(make(pcls, partition_index=p.partition_index, error_code=code,
                              error_message=msg))
        out.append(make(tcls, name=t.name, partitions=tuple(parts)))
    top = ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return make(cls, throttle_time=0, allow_replication_factor_change=allow_rf_change,
                error_code=top, error_message=None, responses=tuple(out))
