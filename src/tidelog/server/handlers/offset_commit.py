"""OffsetCommit (key 8), v2-9. v2-4 carry a retention time; v7+ a group instance id.
Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as in Kafka."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested
from tidelog.server.coordinator.group.coordinator import CommitEntry
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def _generation(request: Any) -> int:
    for name in ("generation_id_or_member_epoch", "generation_id"):
        if hasattr(request, name):
            return int(getattr(request, name))
    return -1


def _exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    info = ctx.broker.replica_manager.topic(tp.topic)
    return info is not None and 0 <= tp.partition < info.partitions


def _validate_partitions(
    ctx: RequestContext, request: Any
) -> tuple[dict[TopicPartition, CommitEntry], dict[TopicPartition, ErrorCode]]:
    """(the offsets to commit, the partitions refused and why): a topic not authorized for
    READ (before existence), then an unknown partition, as KafkaApis.handleOffsetCommitRequest
    splits them; only the first reach the group."""
    offsets: dict[TopicPartition, CommitEntry] = {}
    unknown: dict[TopicPartition, ErrorCode] = {}
    for t in request.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name):
                unknown[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # before existence
                continue
            if not _exists(ctx, tp):
                # Kafka commits only partitions it knows (KafkaApis.handleOffsetCommitRequest)
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = CommitEntry(
                p.committed_offset,
                int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata,
            )
    return offsets, unknown


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    offsets, unknown = _validate_partitions(ctx, request)
    retention_ms = ms(getattr(request, "retention_time", None))
    errors = dict(unknown)
    if offsets:  # like Kafka, a request naming only unknown partitions never reaches the group
        coord = coordinator_for(ctx.broker)
        committed = coord.commit_offsets(
            request.group_id,
            offsets,
            member_id=request.member_id,
            generation_id=_generation(request),
            group_instance_id=getattr(request, "group_instance_id", None),
            retention_time_ms=retention_ms,
            api_version=ctx.api_version,
        )
        if any(e == ErrorCode.NONE for e in committed.values()):  # answered once replicated
            error = await replicated(coord, request.group_id)
            committed = {tp: error if e == ErrorCode.NONE else e for tp, e in committed.items()}
        errors |= committed
    return _commit_response(ctx, request, errors)


def _commit_response(
    ctx: RequestContext, request: Any, errors: dict[TopicPartition, ErrorCode]
) -> Any:
    """The OffsetCommitResponse: every partition of the request with its error code."""
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    topics = tuple(
        make(
            tcls,
            name=t.name,
            partitions=tuple(
                make(
                    pcls,
                    partition_index=p.partition_index,
                    error_code=errors[TopicPartition(t.name, p.partition_index)],
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(cls, throttle_time=0, topics=topics)
