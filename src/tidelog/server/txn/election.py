"""The transaction coordinator follows ``__transaction_state`` leadership (Kafka's
TransactionCoordinator.onElection / onResignation over TransactionStateManager's
loadTransactionsForTxnTopicPartition and removeTransactionsForTxnTopicPartition).

On becoming leader of partition N the broker loads N's transactional ids in the background
(COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes the transactions it finds prepared
(PrepareCommit / PrepareAbort: the markers are written again, as Kafka resends them). On
losing N it forgets N's ids at once (NOT_COORDINATOR). Each election and resignation bumps
the partition's load epoch, so a superseded load installs nothing.
"""

from __future__ import annotations

import asyncio
import logging

from .coordinator import TransactionCoordinator
from .records import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

LOAD_BATCHES_PER_TURN = 64


def on_election(coord: TransactionCoordinator, partition: int) -> asyncio.Task[None]:
    state = coord.state
    epoch = state.load_epochs.get(partition, 0) + 1
    state.load_epochs[partition] = epoch
    state.forget_partition(partition)
    state.loading.add(partition)
    return asyncio.get_running_loop().create_task(_load(coord, partition, epoch))


def on_resignation(coord: TransactionCoordinator, partition: int) -> int:
    """Forget ``partition``'s transactional ids; returns how many were unloaded."""
    state = coord.state
    state.load_epochs[partition] = state.load_epochs.get(partition, 0) + 1
    state.loading.discard(partition)
    state.owned.discard(partition)
    return state.forget_partition(partition)


async def _load(coord: TransactionCoordinator, partition: int, epoch: int) -> None:
    state = coord.state
    latest: dict[bytes, bytes | None] = {}
    try:
        for i, batch in enumerate(state.store.read_batches(partition)):
            state.replay_batch(latest, batch)
            if i % LOAD_BATCHES_PER_TURN == LOAD_BATCHES_PER_TURN - 1:
                await asyncio.sleep(0)
                if state.load_epochs.get(partition) != epoch:
                    return
    except Exception:
        log.exception("failed to read %s-%d; loading what was read", TRANSACTION_STATE_TOPIC,
                      partition)
    if state.load_epochs.get(partition) != epoch or not coord.active:
        return
    prepared = state.complete_load(partition, latest)
    log.info("loaded %s-%d (%d prepared transactions to complete)", TRANSACTION_STATE_TOPIC,
             partition, len(prepared))
    coord.resume(prepared)
