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
# v0: the SASL tokens follow as bare size-prefixed frames (the connection handles them);
# v1: they follow as SaslAuthenticate requests
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or (session.complete and not session.can_reauthenticate):
        return make(cls, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())
    mechanisms = tuple(session.listener.mechanisms)
    if not session.handshake(str(request.mechanism), ctx.api_version):
        ctx.close_reason = f"unsupported SASL mechanism {request.mechanism}"
        return make(cls, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
    return make(cls, error_code=0, mechanisms=mechanisms)
