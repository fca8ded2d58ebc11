"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch from the partition's
leader-epoch checkpoint, as consumers ask to validate their position after a leader change
(KIP-320) and followers to find where to truncate. Only the leader answers
(NOT_LEADER_OR_FOLLOWER elsewhere); a current_leader_epoch larger than the partition's is
UNKNOWN_LEADER_EPOCH, a smaller one FENCED_LEADER_EPOCH (Kafka's lastOffsetForLeaderEpoch).
An epoch the log never saw, or newer than its latest, is answered
(-1, -1) as Kafka's LeaderEpochFileCache does. Consumers need DESCRIBE on the topic,
followers (replica_id >= 0, v3+) CLUSTER_ACTION on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import to_error
from ..security import AclOperation, ResourceType

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4
UNDEFINED = -1


def _end_offset(ctx: RequestContext, tp: TopicPartition, p: Any) -> tuple[int, int, int]:
    """(error, epoch, end offset)."""
    epoch, offset = ctx.broker.replica_manager.last_offset_for_leader_epoch(
        tp, int(p.current_leader_epoch), int(p.leader_epoch))
    return ErrorCode.NONE, epoch, offset


def _partition(ctx: RequestContext, pcls: Any, topic: str, p: Any, allowed: bool) -> Any:
    code: int
    if not allowed:
        code, epoch, offset = ErrorCode.TOPIC_AUTHORIZATION_FAILED, UNDEFINED, UNDEFINED
    else:
        try:
            code, epoch, offset = _end_offset(ctx, TopicPartition(topic, p.partition), p)
        except Exception as exc:
            code, _ = to_error(exc)
            epoch, offset = UNDEFINED, UNDEFINED
    return make(pcls, error_code=code, partition=p.partition, leader_epoch=epoch,
                end_offset=offset)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    follower = int(getattr(request, "replica_id", -1)) >= 0
    cluster_ok = (not follower) or ctx.authorize(
        AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
    out = []
    for t in request.topics:
        allowed = cluster_ok and (
            follower or ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic))
        parts = tuple(_partition(ctx, pcls, t.topic, p, allowed) for p in t.partitions)
        out.append(make(tcls, topic=t.topic, partitions=parts))
    return make(cls, throttle_time=0, topics=tuple(out))
