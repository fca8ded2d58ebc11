"""OffsetFetch (key 9), v1-9. v2+ answers ``topics=null`` with every committed partition and
has a top-level error; v8 batches groups (KIP-709); v9's member id and epoch are checked for a
KIP-848 consumer group (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), not for a classic one, as
Kafka does."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.offsets import FetchedOffset
from tidelog.server.coordinator.group.txn_offsets import has_pending
from tidelog.server.coordinator.group.wiring import coordinator_for
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def _requested(topics: Any) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


def _fetch(
    coord: GroupCoordinator, group_id: str, topics: Any, member: tuple[str | None, int]
) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
    return coord.fetch_offsets(group_id, _requested(topics), *member)


def _topics(
    tcls: type, offsets: dict[TopicPartition, FetchedOffset], error: ErrorCode
) -> tuple[Any, ...]:
    pcls = nested(tcls, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for tp, o in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            make(
                pcls,
                partition_index=tp.partition,
                committed_offset=o.offset,
                committed_leader_epoch=o.leader_epoch,
                metadata=o.metadata,
                error_code=o.error if error == ErrorCode.NONE else error,
            )
        )
    return tuple(make(tcls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items())


def _authorized_fetch(
    ctx: RequestContext, coord: GroupCoordinator, group_id: str, topics: Any,
    require_stable: bool = False, member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
    """Kafka: DESCRIBE on the group, then on each topic (named topics answer
    TOPIC_AUTHORIZATION_FAILED, an all-topics fetch leaves them out)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    err, offsets = _fetch(coord, group_id, topics, member)
    if require_stable:  # KIP-447: offsets of an undecided transaction are not answered yet
        unstable = FetchedOffset(-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
        for tp in offsets:
            if has_pending(coord.manager, group_id, tp):
                offsets[tp] = unstable
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    for tp in list(offsets):
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
            if topics is None:
                del offsets[tp]
            else:
                offsets[tp] = FetchedOffset(-1, -1, "", denied)
    return err, offsets


async def handle(ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    coord = coordinator_for(ctx.broker)
    cls = response_class(API_KEY, v)
    if v >= 8:
        gcls = nested(cls, "groups")
        tcls = nested(gcls, "topics")
        groups = []
        for g in request.groups:
            member = (getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1)))
            err, offsets = _authorized_fetch(ctx, coord, g.group_id, g.topics,
                                             bool(request.require_stable), member)
            groups.append(
                make(
                    gcls,
                    group_id=g.group_id,
                    error_code=err,
                    topics=_topics(tcls, offsets, ErrorCode.NONE),
                )
            )
        return make(cls, throttle_time=0, groups=tuple(groups))
    err, offsets = _authorized_fetch(ctx, coord, request.group_id, request.topics,
                                     bool(getattr(request, "require_stable", False)))
    if v < 2 and err != ErrorCode.NONE:
        # v0-1 have no top-level error: every requested partition carries it
        offsets = {tp: FetchedOffset(-1, -1, "", err) for tp in _requested(request.topics) or []}
    return make(
        cls,
        throttle_time=0,
        error_code=err,
        topics=_topics(nested(cls, "topics"), offsets, ErrorCode.NONE),
    )
