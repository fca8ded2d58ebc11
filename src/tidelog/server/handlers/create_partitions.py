"""CreatePartitions (key 37): grow a topic's partition count (persisted)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from .. import topic_admin
from ..context import RequestContext
from ..errors import ApiError, to_error
from ..security import AclOperation, ResourceType

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    rm = ctx.broker.replica_manager
    out = []
    for t in request.topics:
        code, msg = ErrorCode.NONE, None
        try:
            if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            await topic_admin.create_partitions(
                rm, t.name, t.count, validate_only=bool(request.validate_only)
            )
        except Exception as exc:
            code, msg = to_error(exc)
        out.append(make(rcls, name=t.name, error_code=code, error_message=msg))
    return make(cls, throttle_time=0, results=tuple(out))
