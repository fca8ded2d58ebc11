"""Heartbeat (key 12), v0-4: keeps a member's session alive; tells it to rejoin."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make
from tidelog.server.group.wiring import coordinator_for

from ..context import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    err = coordinator_for(ctx.broker).heartbeat(
        request.group_id,
        request.member_id,
        request.generation_id,
        getattr(request, "group_instance_id", None),
    )
    return make(response_class(API_KEY, ctx.api_version), throttle_time=0, error_code=err)
