"""EndTxn (key 26) v0-4: commit or abort; the coordinator writes PrepareCommit/PrepareAbort,
the markers, then CompleteCommit/CompleteAbort (transactions v1: no epoch bump on end)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.coordinator.transaction.wiring import replicated, txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType

from ..context import RequestContext

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tid = request.transactional_id
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return make(cls, throttle_time=0,
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coord = txn_coordinator_for(ctx.broker)
    err = coord.end_txn(
        tid, int(request.producer_id), int(request.producer_epoch), bool(request.committed))
    if err == ErrorCode.NONE:
        err = await replicated(coord, tid)
    if err == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        err = ErrorCode.INVALID_PRODUCER_EPOCH
    return make(cls, throttle_time=0, error_code=err)
