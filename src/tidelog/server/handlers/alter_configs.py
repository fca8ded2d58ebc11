"""AlterConfigs (key 33): replaces a topic's whole override set (persisted)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.errors import ErrorCode

from ..configs import TOPIC, alter_configs_response
from ..context import RequestContext
from ..errors import ApiError

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    if res.resource_type != TOPIC:
        raise ApiError(ErrorCode.INVALID_REQUEST, "only topic configs can be altered")
    configs = {c.name: c.value for c in res.configs if c.value is not None}
    ctx.broker.replica_manager.set_topic_configs(
        res.resource_name, configs, validate_only=validate_only
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    return alter_configs_response(ctx, request, API_KEY, _alter)
