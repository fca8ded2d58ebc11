"""TxnOffsetCommit (key 28) v0-4: offsets written inside the producer's transaction; they
become the group's committed offsets only when the transaction commits (its marker reaches
the group's ``__consumer_offsets`` partition), and vanish if it aborts."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.offsets import CommitEntry
from tidelog.server.coordinator.group.txn_offsets import commit_txn_offsets
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


def _errors(ctx: RequestContext, request: Any) -> dict[TopicPartition, ErrorCode]:
    tps = [TopicPartition(t.name, p.partition_index) for t in request.topics
           for p in t.partitions]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return dict.fromkeys(tps, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return dict.fromkeys(tps, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    rm = ctx.broker.replica_manager
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, CommitEntry] = {}
    for t in request.topics:
        info = rm.topic(t.name)
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name):
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= tp.partition < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = CommitEntry(int(p.committed_offset),
                                          int(getattr(p, "committed_leader_epoch", -1)),
                                          p.committed_metadata)
    if offsets:
        errors |= commit_txn_offsets(
            coordinator_for(ctx.broker), request.group_id, offsets,
            producer_id=int(request.producer_id), producer_epoch=int(request.producer_epoch),
            member_id=getattr(request, "member_id", "") or "",
            generation_id=int(getattr(request, "generation_id", -1)))
    return errors


async def handle(ctx: RequestContext, request: Any) -> Any:
    errors = _errors(ctx, request)
    if any(e == ErrorCode.NONE for e in errors.values()):  # answered once replicated
        coord = coordinator_for(ctx.broker)
        error = await replicated(coord, request.group_id)
        if error != ErrorCode.NONE:  # not pending: the marker must not apply them
            coord.manager.pending_txn.fail(int(request.producer_id), request.group_id,
                                           [tp for tp, e in errors.items() if e == ErrorCode.NONE])
        errors = {tp: error if e == ErrorCode.NONE else e for tp, e in errors.items()}
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    topics = tuple(
        make(tcls, name=t.name, partitions=tuple(
            make(pcls, partition_index=p.partition_index,
                 error_code=errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions))
        for t in request.topics)
    return make(cls, throttle_time=0, topics=topics)
