"""JoinGroup (key 11), v0-8 (v8 carries the rebalance reason, logged with the rebalance). The
response waits until the rebalance completes (or the member must retry with the id it was
given: MEMBER_ID_REQUIRED, v4+). v9 (KIP-814's skip_assignment for a rejoining static leader)
is not served."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested
from tidelog.server.coordinator.group.coordinator import JoinRequest
from tidelog.server.coordinator.group.member import JoinResult
from tidelog.server.coordinator.group.wiring import coordinator_for, join_future, replicated

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 8


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    v = ctx.api_version
    session = ms(request.session_timeout)
    rebalance = ms(getattr(request, "rebalance_timeout", None)) if v >= 1 else session
    req = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
        require_known_member_id=v >= 4 and getattr(request, "group_instance_id", None) is None,
        reason=getattr(request, "reason", None),
    )
    fut, done = join_future()
    coord = coordinator_for(ctx.broker)
    coord.join_group(req, done)
    r = await fut
    if r.error == ErrorCode.NONE and req.group_id in coord.consumer.groups:
        error = await replicated(coord, req.group_id)  # a classic member of a consumer group
        if error != ErrorCode.NONE:
            r = JoinResult(error, member_id=r.member_id)
    cls = response_class(API_KEY, v)
    mcls = nested(cls, "members")
    members = tuple(
        make(
            mcls, member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
        )
        for m in r.members
    )
    return make(
        cls,
        throttle_time=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""),
        leader=r.leader_id,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=members,
    )
