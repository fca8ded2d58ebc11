"""ShareGroupDescribe (key 77), v1: KIP-932 share groups as admin clients see them (group
epoch, members with subscriptions and assignments). Another kind of group answers
GROUP_ID_NOT_FOUND ("not a share group"), as in Kafka."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .describe_groups import AUTHORIZED_OPERATIONS_OMITTED

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1
SHARE_ASSIGNOR = "simple"  # Kafka's share group assignor


def _described(ctx: RequestContext, coord: GroupCoordinator, gcls: type, group_id: str,
               with_ops: bool) -> Any:
    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return make(gcls, error_code=code, error_message=message, group_id=group_id,
                    group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                    members=(), authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return failed(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    err = coord.group_error(group_id)
    if err != ErrorCode.NONE:
        return failed(err)
    group = coord.share.groups.get(group_id)
    if group is None:
        other = group_id in coord.groups or group_id in coord.consumer.groups
        what = "is not a share group" if other else "not found"
        return failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {what}.")
    names = {t.topic_id: t.name for t in ctx.broker.replica_manager.topics()}
    mcls = nested(gcls, "members")
    acls = nested(mcls, "assignment")
    tcls = nested(acls, "topic_partitions")
    members = tuple(make(
        mcls, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
        client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names,
        assignment=make(acls, topic_partitions=tuple(
            make(tcls, topic_id=t, topic_name=names.get(t, ""), partitions=tuple(sorted(ps)))
            for t, ps in sorted(m.assigned.items(), key=lambda kv: names.get(kv[0], "")))))
        for m in group.members.values())
    return make(gcls, error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state(),
                group_epoch=group.group_epoch, assignment_epoch=group.group_epoch,
                assignor_name=SHARE_ASSIGNOR, members=members,
                authorized_operations=(ctx.authorized_operations(ResourceType.GROUP, group_id)
                                       if with_ops else AUTHORIZED_OPERATIONS_OMITTED))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    coord = coordinator_for(ctx.broker)
    with_ops = bool(request.include_authorized_operations)
    return make(cls, throttle_time=0, groups=tuple(
        _described(ctx, coord, gcls, g, with_ops) for g in request.group_ids))
