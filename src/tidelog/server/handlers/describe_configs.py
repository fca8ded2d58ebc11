"""DescribeConfigs (key 32) for topics (overrides, broker synonyms, defaults), the broker,
groups and client metrics subscriptions."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..configs import (
    BROKER,
    BROKER_LOGGER,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC,
    ConfigEntry,
    broker_entries,
    topic_entries,
)
from ..context import RequestContext
from ..dynamic_config import dynamic_config
from ..errors import ApiError, to_error
from ..security import AclOperation
from ..security.config_auth import CLIENT_METRICS, GROUP, config_denied
from ..telemetry import manager_for
from .consumer_group_heartbeat import group_config_entries

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4


def _entries(ctx: RequestContext, rtype: int, name: str) -> list[ConfigEntry]:
    broker = ctx.broker
    if rtype == TOPIC:
        rm = broker.replica_manager
        info = rm.topic(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        effective = rm.topic_config(name).to_props()
        dc = dynamic_config(broker)
        return topic_entries(info.configs, (
            (dc.layers[str(broker.node_id)], DYNAMIC_BROKER_CONFIG),
            (dc.layers[""], DYNAMIC_DEFAULT_BROKER_CONFIG),
            (dc.static, STATIC_BROKER_CONFIG)), effective)
    if rtype == BROKER:
        dc = dynamic_config(broker)
        dc.entity(name)  # another broker's id: INVALID_REQUEST
        return broker_entries(broker.config.values, dc.static, dc.layers[""],
                              dc.layers[str(broker.node_id)])
    if rtype == BROKER_LOGGER:
        return []
    if rtype == GROUP:  # KIP-848 / KIP-932 group configs
        return group_config_entries(broker, name)
    if rtype == CLIENT_METRICS:  # KIP-714 subscriptions
        return [ConfigEntry(e.name, e.value, e.source, e.type, e.doc)
                for e in manager_for(broker).configs.entries(name)]
    raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")


def _result(ctx: RequestContext, rcls: Any, request: Any, res: Any) -> Any:
    ccls = nested(rcls, "configs")
    scls = nested(ccls, "synonyms")
    try:
        denied = config_denied(ctx, AclOperation.DESCRIBE_CONFIGS, int(res.resource_type),
                               res.resource_name)
        if denied is not None:
            raise ApiError(denied)
        entries = _entries(ctx, res.resource_type, res.resource_name)
    except Exception as exc:
        code, msg = to_error(exc)
        return make(
            rcls,
            error_code=code,
            error_message=msg,
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            configs=(),
        )
    keys = res.configuration_keys
    if keys is not None:
        entries = [e for e in entries if e.name in keys]
    synonyms = bool(getattr(request, "include_synonyms", False))
    docs = bool(getattr(request, "include_documentation", False))
    configs = tuple(
        make(
            ccls,
            name=e.name,
            value=None if e.sensitive else e.value,
            read_only=e.read_only,
            config_source=e.source,
            is_sensitive=e.sensitive,
            config_type=e.type,
            documentation=e.doc if docs else None,
            synonyms=tuple(make(scls, name=n, value=v, source=s) for n, v, s in e.synonyms)
            if synonyms
            else (),
        )
        for e in entries
    )
    return make(
        rcls,
        error_code=0,
        error_message=None,
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        configs=configs,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    return make(
        cls,
        throttle_time=0,
        results=tuple(_result(ctx, rcls, request, r) for r in request.resources),
    )
