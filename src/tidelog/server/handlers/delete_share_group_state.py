"""DeleteShareGroupState (key 86), v0: a share-partition's state is removed (a tombstone in
``__share_group_state``)."""

from __future__ import annotations

from typing import Any

from tidelog.server.coordinator.share.state_coordinator import StateResult

from ..context import RequestContext
from .share_state_common import answer

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer(ctx, API_KEY, request,
                        lambda c, key, p: StateResult(c.delete(key)))
