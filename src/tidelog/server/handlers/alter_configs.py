"""AlterConfigs (key 33): replaces a topic's whole override set, or a broker's (its id) or
the cluster default's (empty name) dynamic configs (server/dynamic_config.py); persisted."""

from __future__ import annotations

from typing import Any

from tidelog.config.iceberg_config import canonical_topic_configs
from tidelog.protocol.errors import ErrorCode

from ..configs import BROKER, TOPIC, alter_configs_response
from ..context import RequestContext
from ..dynamic_config import dynamic_config
from ..errors import ApiError

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    configs = {c.name: c.value for c in res.configs if c.value is not None}
    if res.resource_type == BROKER:
        dynamic_config(ctx.broker).alter(res.resource_name, configs, validate_only)
        return
    if res.resource_type != TOPIC:
        raise ApiError(ErrorCode.INVALID_REQUEST, "only topic and broker configs can be altered")
    ctx.broker.admin_manager.alter_topic_configs(
        res.resource_name, canonical_topic_configs(configs), validate_only=validate_only
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return alter_configs_response(ctx, request, API_KEY, _alter)
