"""FindCoordinator (key 10): this node coordinates every group (single node). v4+ batches
keys (KIP-699). key_type 1 finds the transaction coordinator (this node too)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.group.wiring import coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.server.txn.wiring import txn_coordinator_for

from ..context import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _lookup_txn(ctx: RequestContext, key: str) -> tuple[ErrorCode, str | None]:
    """Kafka creates ``__transaction_state`` on the first transaction FindCoordinator."""
    if not key:
        return ErrorCode.INVALID_REQUEST, "The transactional id must not be empty."
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    coord = txn_coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    coord.state.store.ensure_topic()
    return ErrorCode.NONE, None


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == TRANSACTION_KEY_TYPE:
        return _lookup_txn(ctx, key)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}."
    if not key:
        return ErrorCode.INVALID_REQUEST, "The group id must not be empty."
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    coord = coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    return ErrorCode.NONE, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    (host, port), node = ctx.endpoint, ctx.broker.node_id
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.api_version >= 4:
        ccls = nested(cls, "coordinators")
        out = []
        for key in request.coordinator_keys:
            err, msg = _lookup(ctx, key, key_type)
            ok = err == ErrorCode.NONE
            out.append(
                make(
                    ccls,
                    key=key,
                    node_id=node if ok else -1,
                    host=host if ok else "",
                    port=port if ok else -1,
                    error_code=err,
                    error_message=msg,
                )
            )
        return make(cls, throttle_time=0, coordinators=tuple(out))
    err, msg = _lookup(ctx, request.key, key_type)
    ok = err == ErrorCode.NONE
    return make(
        cls,
        throttle_time=0,
        error_code=err,
        error_message=msg,
        node_id=node if ok else -1,
        host=host if ok else "",
        port=port if ok else -1,
    )
