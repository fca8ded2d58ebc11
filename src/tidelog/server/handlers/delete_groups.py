"""DeleteGroups (key 42), v0-2: only empty groups; their offsets and metadata get
tombstones in __consumer_offsets."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    allowed = [g for g in request.groups_names
               if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g)]
    coord = coordinator_for(ctx.broker)
    deleted = coord.delete_groups(allowed)
    for g in [g for g, e in deleted.items() if e == ErrorCode.NONE]:  # once replicated
        deleted[g] = await replicated(coord, g)
    denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    results = {g: deleted.get(g, denied) for g in request.groups_names}
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    out = tuple(make(rcls, group_id=g, error_code=e) for g, e in results.items())
    return make(cls, throttle_time=0, results=out)
