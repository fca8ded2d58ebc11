"""InitProducerId (key 22) for idempotent producers: a fresh producer id (from a durably
reserved block, so ids are never reused after a crash) with epoch 0. Without a
transactional id Kafka "blindly accepts" the request and hands out a new id even when the
client passes its current id/epoch (KIP-360 bumps are for transactional producers), so
this does too. Transactions are not supported."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make

from ..context import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if request.transactional_id is not None:
        return make(
            cls,
            throttle_time=0,
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    rm = ctx.broker.replica_manager
    return make(
        cls, throttle_time=0, error_code=0, producer_id=rm.allocate_producer_id(), producer_epoch=0
    )
