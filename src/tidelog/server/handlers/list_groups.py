"""ListGroups (key 16), v0-5 (v4 filters by state, v5 by type: every group is "classic")."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    err, groups = coordinator_for(ctx.broker).list_groups(
        getattr(request, "states_filter", ()) or (), getattr(request, "types_filter", ()) or ()
    )
    # Kafka: every group with DESCRIBE on the cluster, else the groups one may DESCRIBE
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        groups = [g for g in groups
                  if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    out = tuple(
        make(
            gcls,
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in groups
    )
    return make(cls, throttle_time=0, error_code=err, groups=out)
