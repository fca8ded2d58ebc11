"""What the share coordinator APIs (83-87) share: Kafka's ShareCoordinatorService answers
each share-partition key from the shard owning its ``__share_group_state`` partition; the
callers are brokers (CLUSTER_ACTION on the cluster). Each answer is sent once the ISR holds
what the request wrote."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for
from tidelog.server.coordinator.share.state_coordinator import (
    ShareStateCoordinator,
    StateResult,
)
from tidelog.server.coordinator.share.uncommitted import StateKey
from tidelog.server.coordinator.share.wiring import state_replicated

from ..context import RequestContext
from ..security import AclOperation, ResourceType

PartitionFn = Callable[[ShareStateCoordinator, StateKey, Any], StateResult]
FieldsFn = Callable[[StateResult, type], dict[str, Any]]


def _no_fields(_r: StateResult, _cls: type) -> dict[str, Any]:
    return {}


async def answer(ctx: RequestContext, api_key: int, request: Any, fn: PartitionFn,
                 fields: FieldsFn = _no_fields) -> Any:
    """Apply ``fn`` to every (topic id, partition) of the request and answer them all."""
    cls = response_class(api_key, ctx.api_version)
    tcls = nested(cls, "results")
    pcls = nested(tcls, "partitions")
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
    share = ctx.broker.group_coordinator.share if ctx.broker.group_coordinator else None
    coord = share.state_coordinator if share is not None else None
    results: list[tuple[uuid.UUID | None, list[tuple[int, StateResult]]]] = []
    touched: set[int] = set()
    for t in request.topics:
        parts = []
        for p in t.partitions:
            key = (request.group_id or "", t.topic_id, int(p.partition))
            if not allowed:
                r = StateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            elif coord is None or t.topic_id is None:
                r = StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE if coord is None
                                else ErrorCode.INVALID_REQUEST)
            else:
                r = fn(coord, key, p)
                touched.add(coord.partition_for(key))
            parts.append((int(p.partition), r))
        results.append((t.topic_id, parts))
    failed = {}
    for partition in touched:
        err = await replicated(ctx, partition)
        if err != ErrorCode.NONE:
            failed[partition] = err
    out = []
    for topic_id, parts in results:
        rows = []
        for partition, r in parts:
            if coord is not None and topic_id is not None and r.error == ErrorCode.NONE:
                err = failed.get(coord.partition_for((request.group_id or "", topic_id,
                                                      partition)), ErrorCode.NONE)
                r = StateResult(err) if err != ErrorCode.NONE else r
            extra = fields(r, pcls) if r.error == ErrorCode.NONE else _error_fields(pcls)
            rows.append(make(pcls, partition=partition, error_code=r.error,
                             error_message=r.message, **extra))
        out.append(make(tcls, topic_id=topic_id, partitions=tuple(rows)))
    return make(cls, results=tuple(out))


def _error_fields(pcls: type) -> dict[str, Any]:
    names = set(getattr(pcls, "__dataclass_fields__", {}))
    defaults = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "state_batches": ()}
    return {k: v for k, v in defaults.items() if k in names}


async def replicated(ctx: RequestContext, partition: int) -> ErrorCode:
    state = coordinator_for(ctx.broker).share.state_coordinator
    if state is None:
        return ErrorCode.NONE
    return await state_replicated(state, partition)
