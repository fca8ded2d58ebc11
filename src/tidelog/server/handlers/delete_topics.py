"""DeleteTopics (key 20): by name, or by topic id (v6+)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested
from tidelog.server.coordinator.group.wiring import coordinator_for

from ..context import RequestContext
from ..errors import ApiError, to_error
from ..replica_manager import INTERNAL_TOPICS
from ..security import AclOperation, ResourceType

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
_NO_ID = uuid.UUID(int=0)


def _targets(request: Any) -> list[tuple[str | None, uuid.UUID | None]]:
    if getattr(request, "topic_names", None) is not None and not hasattr(request, "topics"):
        return [(n, None) for n in request.topic_names]
    out: list[tuple[str | None, uuid.UUID | None]] = []
    for t in request.topics:
        tid = t.topic_id if t.topic_id and t.topic_id != _NO_ID else None
        out.append((t.name, tid))
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "responses")
    image = ctx.broker.metadata_cache.image
    out = []
    deleted: list[str] = []
    for name, tid in _targets(request):
        code, msg = ErrorCode.NONE, None
        try:
            if tid is not None:
                known = image.topic_by_id(tid)
                if known is None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID)
                name = known.name
            if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name or ""):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if name in INTERNAL_TOPICS:
                raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED,
                               f"Internal topic {name} cannot be deleted")
            info = await ctx.broker.admin_manager.delete_topic(
                name or "", timeout_ms=ms(request.timeout))
            tid = info.topic_id
            deleted.append(info.name)
        except Exception as exc:
            code, msg = to_error(exc)
        out.append(
            make(rcls, name=name, topic_id=tid or _NO_ID, error_code=code, error_message=msg)
        )
    if deleted:
        # Committed offsets of a deleted topic must not resurface if it is re-created.
        coordinator_for(ctx.broker).on_topics_deleted(deleted)
    return make(cls, throttle_time=0, responses=tuple(out))
