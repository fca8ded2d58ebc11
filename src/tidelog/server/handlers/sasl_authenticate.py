"""SaslAuthenticate (key 36): one SASL token each way until the mechanism completes (again
for KIP-368 re-authentication when ``connections.max.reauth.ms`` is set). A
failure is answered with SASL_AUTHENTICATION_FAILED at once and the connection closed after
``connection.failed.authentication.delay.ms`` (Kafka's delayed close)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make

from ..context import RequestContext
from ..security.scram import SaslAuthenticationError

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    session = ctx.session
    if session is None or session.complete:
        return make(
            cls,
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication"
            if session is not None else "SaslAuthenticate on a listener without SASL",
            auth_bytes=b"",
        )
    try:
        challenge = session.authenticate(bytes(request.auth_bytes))
    except SaslAuthenticationError as exc:
        # Kafka answers at once and closes after connection.failed.authentication.delay.ms
        # (a client that reconnects at once is slowed down; answering late instead races
        # the client's read of the answer against the close)
        ctx.close_reason = f"SASL authentication failed: {exc}"
        ctx.close_delay_ms = session.listener.failed_auth_delay_ms
        return make(
            cls,
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message=str(exc),
            auth_bytes=b"",
        )
    # KIP-368: the client re-authenticates before this many ms (0: never needed)
    lifetime = session.listener.reauth_ms if session.complete else 0
    return make(cls, error_code=0, error_message=None, auth_bytes=challenge,
                session_lifetime=lifetime)
