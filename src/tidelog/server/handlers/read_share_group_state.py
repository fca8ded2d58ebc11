"""ReadShareGroupState (key 84), v0: the share-partition leader reads its share-partition's
state (start offset -1 when none is stored); its leader epoch fences older leaders."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.share.state_coordinator import StateResult

from ..context import RequestContext
from .share_state_common import answer

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0


def _fields(r: StateResult, pcls: type) -> dict[str, Any]:
    assert r.state is not None
    bcls = nested(pcls, "state_batches")
    return {"state_epoch": r.state.state_epoch, "start_offset": r.state.start_offset,
            "state_batches": tuple(
                make(bcls, first_offset=a, last_offset=b, delivery_state=s, delivery_count=n)
                for a, b, s, n in r.state.batches)}


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer(ctx, API_KEY, request,
                        lambda c, key, p: c.read(key, int(p.leader_epoch)), _fields)
