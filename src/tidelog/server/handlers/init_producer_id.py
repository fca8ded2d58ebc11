"""InitProducerId (key 22) for idempotent producers: a fresh producer id (from a durably
reserved block, so ids are never reused after a crash) with epoch 0; v3+ epoch bump
(KIP-360) when the client passes its current id/epoch. Transactions are not supported."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make

from ..context import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4
MAX_EPOCH = 32767


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
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return make(cls, throttle_time=0, error_code=0, producer_id=pid, producer_epoch=epoch + 1)
    return make(
        cls, throttle_time=0, error_code=0, producer_id=rm.allocate_producer_id(), producer_epoch=0
    )
