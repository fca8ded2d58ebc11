"""GetTelemetrySubscriptions (key 71, KIP-714): a client instance id for a new client, the
metrics its matching subscriptions ask for, how often to push them and in which codecs
(tidelog.server.telemetry)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make

from ..context import RequestContext
from ..telemetry import manager_for

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0


def client_attributes(ctx: RequestContext) -> dict[str, str]:
    """What a subscription's ``match`` selects on (ClientMetricsInstanceMetadata)."""
    state = ctx.connection_state
    attrs = {"client_id": ctx.header.client_id or "", "client_source_address": ctx.client_host,
             "client_source_port": str(ctx.client_port)}
    if state.client_software_name:
        attrs["client_software_name"] = state.client_software_name
        attrs["client_software_version"] = state.client_software_version
    return attrs


async def handle(ctx: RequestContext, request: Any) -> Any:
    answer = manager_for(ctx.broker).get_subscriptions(
        request.client_instance_id, client_attributes(ctx), ctx.connection_state)
    return make(
        response_class(API_KEY, ctx.api_version),
        throttle_time=0,
        error_code=answer.error,
        client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id,
        accepted_compression_types=answer.accepted_compression_types,
        push_interval=answer.push_interval_ms,
        telemetry_max_bytes=answer.telemetry_max_bytes,
        delta_temporality=True,
        requested_metrics=answer.metrics,
    )
