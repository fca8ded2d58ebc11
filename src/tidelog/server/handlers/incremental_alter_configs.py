"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on topic overrides, on
a broker's or the cluster default's dynamic configs (server/dynamic_config.py), on group
configs and on client metrics subscriptions (server/telemetry)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.errors import ErrorCode

from ..configs import BROKER, TOPIC, alter_configs_response, apply_incremental, apply_to_broker
from ..context import RequestContext
from ..dynamic_config import dynamic_config
from ..errors import ApiError
from ..security.config_auth import CLIENT_METRICS, GROUP
from ..telemetry import manager_for
from .consumer_group_heartbeat import group_configs_for

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    ops = [(c.name, c.config_operation, c.value) for c in res.configs]
    if res.resource_type == BROKER:
        dc = dynamic_config(ctx.broker)
        new = apply_to_broker(dc.entity(res.resource_name), ops, dc.effective())
        dc.alter(res.resource_name, new, validate_only)
        return
    if res.resource_type == GROUP:  # KIP-848 / KIP-932 group configs
        group_configs_for(ctx.broker).alter(res.resource_name, ops, validate_only)
        return
    if res.resource_type == CLIENT_METRICS:  # KIP-714 subscriptions
        manager_for(ctx.broker).alter(res.resource_name, ops, validate_only)
        return
    if res.resource_type != TOPIC:
        raise ApiError(ErrorCode.INVALID_REQUEST, "only topic and broker configs can be altered")
    rm = ctx.broker.replica_manager
    info = rm.topic(res.resource_name)
    if info is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{res.resource_name}' does not exist."
        )
    new = apply_incremental(dict(info.configs), ops,
                            rm.topic_config(res.resource_name).to_props())
    ctx.broker.admin_manager.alter_topic_configs(res.resource_name, new,
                                                 validate_only=validate_only)


async def handle(ctx: RequestContext, request: Any) -> Any:
    return alter_configs_response(ctx, request, API_KEY, _alter)
