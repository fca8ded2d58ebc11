"""LeaveGroup (key 13), v0-5; v3+ removes a batch of members (KIP-345)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    v = ctx.api_version
    cls = response_class(API_KEY, v)
    if v >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    coord = coordinator_for(ctx.broker)
    consumer_group = request.group_id in coord.consumer.groups
    err, per_member = coord.leave_group(request.group_id, members)
    if consumer_group and err == ErrorCode.NONE:  # classic members of a consumer group
        err = await replicated(coord, request.group_id)
    if v < 3:
        # One member: its error is the response's error (Kafka's LeaveGroupResponse rule).
        top = err if err != ErrorCode.NONE else per_member[0]
        return make(cls, throttle_time=0, error_code=top)
    mcls = nested(cls, "members")
    out = tuple(
        make(mcls, member_id=m, group_instance_id=i, error_code=e)
        for (m, i), e in zip(members, per_member, strict=True)
    )
    return make(cls, throttle_time=0, error_code=err, members=out)
