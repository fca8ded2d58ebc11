"""FindCoordinator (key 10): this node coordinates every group (single node). v4+ batches
keys (KIP-699). key_type 1 finds the transaction coordinator (this node too). As Kafka's
getOrCreateInternalTopic, the first lookup creates ``__consumer_offsets`` or
``__transaction_state``: off the event loop (topic_admin), answered once it exists."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.group.log_store import LogOffsetsStore, offsets_topic_configs
from tidelog.server.group.records import OFFSETS_TOPIC
from tidelog.server.group.wiring import coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.server.txn.records import TRANSACTION_STATE_TOPIC
from tidelog.server.txn.state_manager import transaction_topic_configs
from tidelog.server.txn.wiring import txn_coordinator_for

from .. import topic_admin
from ..context import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


async def _lookup_txn(ctx: RequestContext, key: str) -> tuple[ErrorCode, str | None]:
    """Kafka creates ``__transaction_state`` on the first transaction FindCoordinator."""
    if not key:
        return ErrorCode.INVALID_REQUEST, "The transactional id must not be empty."
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    coord = txn_coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    cfg = coord.state.store.config
    if not await topic_admin.ensure_internal_topic(
        ctx.broker.replica_manager, TRANSACTION_STATE_TOPIC,
        cfg.transaction_state_log_num_partitions, transaction_topic_configs(cfg),
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None  # being created by another request
    return ErrorCode.NONE, None


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == TRANSACTION_KEY_TYPE:
        return await _lookup_txn(ctx, key)
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type}."
    if not key:
        return ErrorCode.INVALID_REQUEST, "The group id must not be empty."
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    coord = coordinator_for(ctx.broker)
    if not coord.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    store = coord.manager.store
    if isinstance(store, LogOffsetsStore) and not await topic_admin.ensure_internal_topic(
        ctx.broker.replica_manager, OFFSETS_TOPIC,
        store.config.offsets_topic_num_partitions, offsets_topic_configs(store.config),
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None  # being created by another request
    return ErrorCode.NONE, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    (host, port), node = ctx.endpoint, ctx.broker.node_id
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.api_version >= 4:
        ccls = nested(cls, "coordinators")
        out = []
        for key in request.coordinator_keys:
            err, msg = await _lookup(ctx, key, key_type)
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
    err, msg = await _lookup(ctx, request.key, key_type)
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
