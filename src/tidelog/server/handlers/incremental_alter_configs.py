"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT on topic overrides."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..configs import TOPIC, apply_incremental
from ..context import RequestContext
from ..errors import ApiError, to_error

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def _alter(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    if res.resource_type != TOPIC:
        raise ApiError(ErrorCode.INVALID_REQUEST, "only topic configs can be altered")
    rm = ctx.broker.replica_manager
    info = rm.topic(res.resource_name)
    if info is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{res.resource_name}' does not exist."
        )
    ops = [(c.name, c.config_operation, c.value) for c in res.configs]
    new = apply_incremental(info.configs, ops, rm.topic_config(res.resource_name).to_props())
    rm.set_topic_configs(res.resource_name, new, validate_only=validate_only)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "responses")
    out = []
    for res in request.resources:
        code, msg = ErrorCode.NONE, None
        try:
            _alter(ctx, res, bool(request.validate_only))
        except Exception as exc:
            code, msg = to_error(exc)
        out.append(
            make(
                rcls,
                error_code=code,
                error_message=msg,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return make(cls, throttle_time=0, responses=tuple(out))
