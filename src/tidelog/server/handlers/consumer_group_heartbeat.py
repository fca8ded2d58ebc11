"""ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer protocol. Members join,
heartbeat, report what they own and receive their assignment from the group coordinator,
which computes it with a server-side assignor (server/coordinator/group/consumer/)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.consumer.coordinator import HeartbeatRequest
from tidelog.server.coordinator.group.consumer.records import Assignment, TopicMetadata
from tidelog.server.coordinator.group.group_configs import GroupConfigStore
from tidelog.server.coordinator.group.wiring import coordinator_for, replicated

from ..configs import ConfigEntry
from ..context import RequestContext
from ..security import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..broker import Broker
    from ..replica_manager import ReplicaManager

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def topic_source(rm: ReplicaManager) -> Callable[[], Mapping[str, TopicMetadata]]:
    """Every topic's id and partition count, as the assignors see them."""
    return lambda: {t.name: TopicMetadata(t.topic_id, t.name, t.partitions)
                    for t in rm.topics()}


def group_configs_for(broker: Broker) -> GroupConfigStore:
    """The group configs (GROUP resource), read on first use: in a cluster from ZooKeeper
    (and followed there), on one broker from the first log dir."""
    coord = coordinator_for(broker)
    store = coord.group_configs
    now_ms = broker.clock.milliseconds()
    if not store.attached:
        cluster = broker.cluster
        if cluster is None:
            store.attach(broker.config.log_dirs[0])
        else:
            from tidelog.server.zk.group_configs import ZkGroupConfigStore

            zk_store = ZkGroupConfigStore(cluster.zk, coord.config)
            zk_store.attach(broker.config.log_dirs[0])  # a file kept on its own moves in
            zk_store.watch(cluster.config_changes, now_ms)
            store = coord.use_group_configs(zk_store)
    store.ensure_loaded(now_ms)
    return store


def group_config_entries(broker: Broker, group_id: str) -> list[ConfigEntry]:
    """DescribeConfigs on the GROUP resource."""
    return [ConfigEntry(e.name, e.value, e.source, e.type, e.doc)
            for e in group_configs_for(broker).entries(group_id)]


def _owned(topic_partitions: Any) -> Assignment | None:
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions:
        if tp.topic_id is not None:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(
                int(p) for p in tp.partitions)
    return out


def _request(ctx: RequestContext, request: Any) -> HeartbeatRequest:
    timeout = getattr(request, "rebalance_timeout", -1)
    if hasattr(timeout, "total_seconds"):
        timeout = int(timeout.total_seconds() * 1000)
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=_owned(request.topic_partitions),
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return make(cls, throttle_time=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    member_epoch=0, heartbeat_interval=0)
    group_configs_for(ctx.broker)
    coord = coordinator_for(ctx.broker)
    consumer = coord.consumer
    consumer.topics = topic_source(ctx.broker.replica_manager)
    r = consumer.heartbeat(_request(ctx, request))
    error = r.error
    if error == ErrorCode.NONE:  # the group's records answer once replicated
        error = await replicated(coord, request.group_id)
    if error != ErrorCode.NONE:
        return make(cls, throttle_time=0, error_code=error, error_message=r.message,
                    member_id=None, member_epoch=0, heartbeat_interval=0)
    assignment = None
    if r.assignment is not None:
        acls = nested(cls, "assignment")
        tcls = nested(acls, "topic_partitions")
        assignment = make(acls, topic_partitions=tuple(
            make(tcls, topic_id=t, partitions=tuple(sorted(ps)))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))))
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE, member_id=r.member_id,
                member_epoch=r.member_epoch, heartbeat_interval=r.heartbeat_interval_ms,
                assignment=assignment)
