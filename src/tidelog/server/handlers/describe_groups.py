"""DescribeGroups (key 15), v0-6. An unknown group, or a KIP-848 consumer group (not a
classic one), is "Dead" with no error before v6 and GROUP_ID_NOT_FOUND from v6, as in Kafka. ``include_authorized_operations`` (v3+) answers
each group's operations through the authorization seam."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..security import AclOperation, ResourceType

if TYPE_CHECKING:
    from tidelog.server.coordinator.group.coordinator import GroupSummary

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


async def handle(ctx: RequestContext, request: Any) -> Any:
    coord = coordinator_for(ctx.broker)
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    mcls = nested(gcls, "members")
    out = []
    with_ops = bool(getattr(request, "include_authorized_operations", False))
    for group_id in request.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(make(gcls, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                            group_id=group_id, group_state="", protocol_type="",
                            protocol_data="", members=(),
                            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        summary = coord.describe_group(group_id)
        out.append(_described_group(ctx, gcls, mcls, summary, group_id, with_ops))
    return make(cls, throttle_time=0, groups=tuple(out))


def _described_group(
    ctx: RequestContext, gcls: Any, mcls: Any, s: GroupSummary, group_id: str, with_ops: bool
) -> Any:
    """One group's DescribedGroup: its state, protocol and members, and the error Kafka
    answers for a consumer (not classic) or a dead group by request version."""
    err, msg = s.error, None
    if err == ErrorCode.GROUP_ID_NOT_FOUND:  # a consumer group: not a classic one
        err = err if ctx.api_version >= 6 else ErrorCode.NONE
        msg = f"Group {group_id} is not a classic group." if ctx.api_version >= 6 else None
    elif ctx.api_version >= 6 and err == ErrorCode.NONE and s.state == "Dead":
        err, msg = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
    members = tuple(
        make(
            mcls,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        for m in s.members
    )
    return make(
        gcls,
        error_code=err,
        error_message=msg,
        group_id=group_id,
        group_state=s.state,
        protocol_type=s.protocol_type,
        protocol_data=s.protocol,
        members=members,
        authorized_operations=(
            ctx.authorized_operations(ResourceType.GROUP, group_id)
            if with_ops
            else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
