"""ReadShareGroupStateSummary (key 87), v0-1: a share-partition's stored start offset and
epochs, fencing no one (what DescribeShareGroupOffsets reports)."""

from __future__ import annotations

from typing import Any

from tidelog.server.coordinator.share.state_coordinator import StateResult

from ..context import RequestContext
from .share_state_common import answer

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1


def _fields(r: StateResult, pcls: type) -> dict[str, Any]:
    assert r.state is not None
    return {"state_epoch": r.state.state_epoch, "leader_epoch": r.state.leader_epoch,
            "start_offset": r.state.start_offset}


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer(ctx, API_KEY, request, lambda c, key, p: c.summary(key), _fields)
