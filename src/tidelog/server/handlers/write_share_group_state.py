"""WriteShareGroupState (key 85), v0-1: the share-partition leader writes its state batches,
merged into the stored state; older leader or state epochs are fenced."""

from __future__ import annotations

from typing import Any

from tidelog.server.coordinator.share.state_coordinator import StateResult

from ..context import RequestContext
from .share_state_common import answer

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer(ctx, API_KEY, request, lambda c, key, p: StateResult(c.write(
        key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset),
        tuple((int(b.first_offset), int(b.last_offset), int(b.delivery_state),
               int(b.delivery_count)) for b in p.state_batches))))
