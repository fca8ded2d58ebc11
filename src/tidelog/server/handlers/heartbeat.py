"""Heartbeat (key 12), v0-4: keeps a member's session alive; tells it to rejoin."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..error_response import error_response
from ..security import AclOperation, ResourceType

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED  # Kafka checks the group first
        return error_response(API_KEY, ctx.api_version, request, code)
    err = coordinator_for(ctx.broker).heartbeat(
        request.group_id,
        request.member_id,
        request.generation_id,
        getattr(request, "group_instance_id", None),
    )
    return make(response_class(API_KEY, ctx.api_version), throttle_time=0, error_code=err)
