"""SaslHandshake (key 17): pick the mechanism on a SASL listener (Kafka's
SaslServerAuthenticator); anywhere else, or after authentication, ILLEGAL_SASL_STATE as
KafkaApis answers."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make

from ..context import RequestContext

API_KEY = 17
# v0 is followed by raw SASL tokens without Kafka headers (pre-1.0 clients); only the
# SaslAuthenticate flow (v1) is served
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or session.complete:
        return make(cls, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())
    mechanisms = tuple(session.listener.mechanisms)
    if not session.handshake(str(request.mechanism)):
        ctx.close_reason = f"unsupported SASL mechanism {request.mechanism}"
        return make(cls, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
    return make(cls, error_code=0, mechanisms=mechanisms)
