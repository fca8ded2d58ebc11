"""ListTransactions (key 66) v0-1 (KIP-664; v1 adds the duration filter of KIP-994):
transactional ids filtered by state and producer id, only those the principal may
DESCRIBE. Unknown state names come back in ``unknown_state_filters``."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested
from tidelog.server.coordinator.transaction.metadata import TransactionState
from tidelog.server.coordinator.transaction.wiring import txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType

from ..context import RequestContext

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    scls = nested(cls, "transaction_states")
    states = set(request.state_filters)
    unknown = tuple(s for s in request.state_filters
                    if TransactionState.from_kafka_name(s) is None)
    coord = txn_coordinator_for(ctx.broker)
    if not coord.active:
        return make(cls, throttle_time=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    unknown_state_filters=(), transaction_states=())
    if coord.state.partitions.loading:  # Kafka: the listing would be partial
        return make(cls, throttle_time=0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    unknown_state_filters=(), transaction_states=())
    listing = coord.list({int(p) for p in request.producer_id_filters}, states,
                         ms(getattr(request, "duration_filter", -1)))
    out = tuple(make(scls, transactional_id=t.transactional_id, producer_id=t.producer_id,
                     transaction_state=t.state)
                for t in listing
                if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 t.transactional_id))
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE,
                unknown_state_filters=unknown, transaction_states=out)
