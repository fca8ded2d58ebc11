"""InitializeShareGroupState (key 83), v0: a share-partition's state starts over at a start
offset with a state epoch (sent by the group coordinator to the share coordinator)."""

from __future__ import annotations

from typing import Any

from tidelog.server.coordinator.share.state_coordinator import StateResult

from ..context import RequestContext
from .share_state_common import answer

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer(ctx, API_KEY, request, lambda c, key, p: StateResult(
        c.initialize(key, int(p.state_epoch), int(p.start_offset))))
