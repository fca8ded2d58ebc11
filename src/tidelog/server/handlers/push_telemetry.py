"""PushTelemetry (key 72, KIP-714): a client instance's OTLP metrics, kept for /metrics
(tidelog.server.telemetry)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make

from ..context import RequestContext
from ..telemetry import manager_for
from .get_telemetry_subscriptions import client_attributes

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    from ..telemetry.manager import Push  # with the manager, by the first push

    push = Push(request.client_instance_id, int(request.subscription_id),
                bool(request.terminating), int(request.compression_type), bytes(request.metrics))
    error = manager_for(ctx.broker).push(push, client_attributes(ctx), ctx.connection_state)
    return make(response_class(API_KEY, ctx.api_version), throttle_time=0,
                error_code=error)
