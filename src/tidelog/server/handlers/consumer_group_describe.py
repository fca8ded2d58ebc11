"""ConsumerGroupDescribe (key 69), v0-1: KIP-848 groups as admin clients see them (group and
assignment epochs, the assignor, each member's subscription, current and target assignment).
A classic group answers GROUP_ID_NOT_FOUND ("not a consumer group"), as in Kafka."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.consumer.group import ConsumerGroup, ConsumerGroupMember
from tidelog.server.coordinator.group.consumer.records import Assignment
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from .describe_groups import AUTHORIZED_OPERATIONS_OMITTED

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1
CONSUMER_MEMBER_TYPE = 1  # v1's MemberType: 0 classic, 1 consumer


def _assignment(acls: type, a: Assignment, names: dict[uuid.UUID, str]) -> Any:
    tcls = nested(acls, "topic_partitions")
    return make(acls, topic_partitions=tuple(
        make(tcls, topic_id=t, topic_name=names.get(t, ""), partitions=tuple(sorted(ps)))
        for t, ps in sorted(a.items(), key=lambda kv: names.get(kv[0], ""))))


def _member(mcls: type, group: ConsumerGroup, m: ConsumerGroupMember,
            names: dict[uuid.UUID, str]) -> Any:
    acls = nested(mcls, "assignment")
    s = m.subscription
    return make(mcls, member_id=m.member_id, instance_id=s.instance_id, rack_id=s.rack_id,
                member_epoch=m.member_epoch, client_id=s.client_id, client_host=s.client_host,
                subscribed_topic_names=tuple(s.subscribed_topic_names),
                subscribed_topic_regex=s.subscribed_topic_regex,
                assignment=_assignment(acls, m.assigned, names),
                target_assignment=_assignment(acls, group.target.get(m.member_id, {}), names),
                member_type=CONSUMER_MEMBER_TYPE)


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
    group = coord.consumer.groups.get(group_id)
    if group is None:
        what = "is not a consumer group" if group_id in coord.groups else "not found"
        return failed(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} {what}.")
    names = {t.topic_id: t.name for t in ctx.broker.replica_manager.topics()}
    mcls = nested(gcls, "members")
    return make(gcls, error_code=ErrorCode.NONE, group_id=group_id,
                group_state=group.state().value, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=coord.consumer.assignor_name(group),
                members=tuple(_member(mcls, group, m, names) for m in group.members.values()),
                authorized_operations=(ctx.authorized_operations(ResourceType.GROUP, group_id)
                                       if with_ops else AUTHORIZED_OPERATIONS_OMITTED))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    gcls = nested(cls, "groups")
    coord = coordinator_for(ctx.broker)
    with_ops = bool(request.include_authorized_operations)
    return make(cls, throttle_time=0, groups=tuple(
        _described(ctx, coord, gcls, g, with_ops) for g in request.group_ids))
