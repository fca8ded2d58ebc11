"""The share coordinator follows ``__share_group_state`` leadership (Kafka's
ShareCoordinatorService.onElection / onResignation): a broker that becomes leader of
partition N loads N's share-partition states in the background (COORDINATOR_LOAD_IN_PROGRESS
for their keys meanwhile); one that loses N forgets them at once (NOT_COORDINATOR). A load
superseded by a resignation or a newer election installs nothing."""

from __future__ import annotations

import asyncio
import logging

from tidelog.server.group.share.records import ShareState
from tidelog.server.group.share.state_coordinator import ShareStateCoordinator, StateKey

log = logging.getLogger(__name__)

LOAD_BATCHES_PER_TURN = 64


def on_election(coord: ShareStateCoordinator, partition: int) -> asyncio.Task[None]:
    epoch = coord.begin_load(partition)
    return asyncio.get_running_loop().create_task(_load(coord, partition, epoch))


def on_resignation(coord: ShareStateCoordinator, partition: int) -> int:
    return coord.unload(partition)


async def _load(coord: ShareStateCoordinator, partition: int, epoch: int) -> None:
    loaded: dict[StateKey, ShareState] = {}
    try:
        for i, batch in enumerate(coord.store.read_batches(partition)):
            coord.replay_batch(loaded, batch)
            if i % LOAD_BATCHES_PER_TURN == LOAD_BATCHES_PER_TURN - 1:
                await asyncio.sleep(0)
                if coord.load_epochs.get(partition) != epoch:
                    return
    except Exception:
        log.exception("failed to read __share_group_state-%d; loading what was read",
                      partition)
    coord.complete_load(partition, epoch, loaded)
