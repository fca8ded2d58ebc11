"""The share-partition leader's durable half (Kafka's SharePartition.initialize and
writeShareGroupState through the Persister).

A share-partition's state is read from its share coordinator when the leader first needs it
(concurrent first fetches share one read) and written back after every change that matters
(acknowledgements, a member's records given back). Writes of one share-partition are
serialised and coalesced: while one is in flight, later changes mark it dirty and the next
write carries the state as it is then, so the coordinator never sees an older state after a
newer one. The leader epoch is the data partition's; the state epoch the one read back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.share.records import StateBatch
from tidelog.server.coordinator.share.state_coordinator import StateResult
from tidelog.server.coordinator.share.uncommitted import StateKey
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger(__name__)

PartitionKey = tuple[str, TopicPartition]  # group, data partition
Snapshot = Callable[[], tuple[int, tuple[StateBatch, ...]]]  # start offset, state batches
FENCED = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH})
# Kafka's SharePartition.fetchPersisterError: what a share-partition leader answers for the
# persister's error (any other is UNKNOWN_SERVER_ERROR)
_PERSISTER_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.GROUP_ID_NOT_FOUND: ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_STATE_EPOCH: ErrorCode.FENCED_STATE_EPOCH,
    ErrorCode.INVALID_REQUEST: ErrorCode.FENCED_STATE_EPOCH,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


def persister_error(error: ErrorCode) -> ErrorCode:
    """The error a ShareFetch answers for a share-partition whose state could not be read."""
    return _PERSISTER_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)


class SharePersister(Protocol):
    async def read(self, key: StateKey, leader_epoch: int) -> StateResult: ...

    async def summary(self, key: StateKey, leader_epoch: int = -1) -> StateResult: ...

    async def write(self, key: StateKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...]) -> ErrorCode: ...

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int
                         ) -> ErrorCode: ...

    async def delete(self, key: StateKey) -> ErrorCode: ...

    async def close(self) -> None: ...


@dataclass
class Epochs:
    state_epoch: int = 0
    leader_epoch: int = -1


class DurableShareState:
    def __init__(self) -> None:
        self.persister: SharePersister | None = None
        self.epochs: dict[PartitionKey, Epochs] = {}
        self.on_fenced: Callable[[PartitionKey], None] = lambda _k: None
        self._dirty: dict[PartitionKey, tuple[StateKey, Snapshot]] = {}
        self._writers: dict[PartitionKey, asyncio.Task[ErrorCode]] = {}
        self._reads: dict[PartitionKey, asyncio.Future[StateResult]] = {}

    async def read(self, key: PartitionKey, state_key: StateKey,
                   leader_epoch: int) -> StateResult:
        """The stored state (one read at a time per share-partition)."""
        assert self.persister is not None
        pending = self._reads.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[StateResult] = asyncio.get_running_loop().create_future()
        self._reads[key] = fut
        try:
            result = await self.persister.read(state_key, leader_epoch)
        except asyncio.CancelledError:
            self._reads.pop(key, None)
            fut.cancel()
            raise
        except Exception as exc:  # never leave the waiters hanging
            log.exception("reading the share state of %s failed", state_key)
            result = StateResult(ErrorCode.UNKNOWN_SERVER_ERROR, message=str(exc))
        finally:
            self._reads.pop(key, None)
        fut.set_result(result)
        if result.error == ErrorCode.NONE and result.state is not None:
            self.epochs[key] = Epochs(result.state.state_epoch, leader_epoch)
        return result

    def schedule(self, key: PartitionKey, state_key: StateKey, snapshot: Snapshot) -> None:
        """Write the share-partition's state soon (after the write in flight, if any)."""
        if self.persister is None:
            return
        self._dirty[key] = (state_key, snapshot)
        if key not in self._writers:
            task = asyncio.get_running_loop().create_task(self._run(key))
            self._writers[key] = task

    async def flush(self, key: PartitionKey) -> ErrorCode:
        """NONE once what was scheduled for ``key`` so far is stored, else the write's error."""
        task = self._writers.get(key)
        return ErrorCode.NONE if task is None else await asyncio.shield(task)

    def close(self) -> None:
        """Broker stop: writes in flight are dropped (the state read back is the last one
        stored)."""
        self._dirty.clear()
        for task in list(self._writers.values()):
            task.cancel()

    def forget(self, key: PartitionKey) -> None:
        self.epochs.pop(key, None)
        self._dirty.pop(key, None)

    async def _run(self, key: PartitionKey) -> ErrorCode:
        err = ErrorCode.NONE
        try:
            while key in self._dirty and self.persister is not None:
                state_key, snapshot = self._dirty.pop(key)
                start, batches = snapshot()
                epochs = self.epochs.setdefault(key, Epochs())
                err = await self.persister.write(state_key, epochs.state_epoch,
                                                 epochs.leader_epoch, start, batches)
                if err in FENCED:
                    log.info("share state of %s fenced (%s): read again on next use",
                             state_key, err.name)
                    self._dirty.pop(key, None)
                    self.on_fenced(key)
                elif err != ErrorCode.NONE:
                    log.warning("could not write the share state of %s: %s", state_key,
                                err.name)
        except Exception:
            log.exception("writing the share state of %s failed", key)
            err = ErrorCode.UNKNOWN_SERVER_ERROR
        finally:
            self._writers.pop(key, None)
        return err
