"""ListConfigResources (key 74; v0 was ListClientMetricsResources): the resources whose
configs DescribeConfigs answers here. v0 lists client-metrics resources only; v1 lists the
types asked (all when none): topics, this broker (BROKER and BROKER_LOGGER, named by id),
the client metrics subscriptions (KIP-714) and the groups with config overrides. A type
Kafka does not list is INVALID_REQUEST, as in Kafka. Needs DESCRIBE_CONFIGS on the
cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security import AclOperation, ResourceType
from ..telemetry import manager_for
from .consumer_group_heartbeat import group_configs_for

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
LISTABLE = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def _names(ctx: RequestContext, rtype: int) -> list[str]:
    if rtype == TOPIC:
        return sorted(i.name for i in ctx.broker.replica_manager.topics())
    if rtype in (BROKER, BROKER_LOGGER):
        return [str(ctx.broker.node_id)]
    if rtype == CLIENT_METRICS:
        return sorted(manager_for(ctx.broker).configs.configs)
    return sorted(group_configs_for(ctx.broker).overrides)  # GROUP


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    types = [CLIENT_METRICS] if ctx.api_version == 0 else list(request.resource_types or LISTABLE)
    if any(t not in LISTABLE for t in types):
        return make(cls, throttle_time=0, error_code=ErrorCode.INVALID_REQUEST)
    rcls = nested(cls, "config_resources")
    found = tuple(
        make(rcls, resource_name=name, resource_type=rtype)
        for rtype in dict.fromkeys(types)
        for name in _names(ctx, rtype)
    )
    return make(cls, throttle_time=0, error_code=0, config_resources=found)
