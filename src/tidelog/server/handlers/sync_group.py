"""SyncGroup (key 14), v0-5: the leader hands in the assignment; everyone waits for it."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.coordinator.group.coordinator import SyncRequest
from tidelog.server.coordinator.group.member import SyncResult
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated, sync_future

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    req = SyncRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    fut, done = sync_future()
    coord = coordinator_for(ctx.broker)
    coord.sync_group(req, done)
    r = await fut
    if r.error == ErrorCode.NONE:  # the leader's assignment answers once replicated
        error = await replicated(coord, request.group_id)
        if error != ErrorCode.NONE:
            r = SyncResult(error)
            coord.assignment_not_replicated(request.group_id, request.generation_id)
    return make(
        response_class(API_KEY, ctx.api_version),
        throttle_time=0,
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )
