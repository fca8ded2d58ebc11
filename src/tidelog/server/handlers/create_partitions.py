"""CreatePartitions (key 37): grow a topic's partition count (persisted), with an explicit
assignment of the new partitions when given, through the broker's AdminManager."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested

from ..context import RequestContext
from ..errors import ApiError, to_error
from ..security import AclOperation, ResourceType

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    out = []
    for t in request.topics:
        code, msg = ErrorCode.NONE, None
        try:
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            assignment = None if t.assignments is None else [
                tuple(a.broker_ids) for a in t.assignments]
            await ctx.broker.admin_manager.create_partitions(
                t.name, t.count, assignment=assignment,
                validate_only=bool(request.validate_only), timeout_ms=ms(request.timeout))
        except Exception as exc:
            code, msg = to_error(exc)
        out.append(make(rcls, name=t.name, error_code=code, error_message=msg))
    return make(cls, throttle_time=0, results=tuple(out))
