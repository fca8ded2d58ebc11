"""The share coordinator (Kafka's ShareCoordinatorShard behind ShareCoordinatorService):
the durable state of share-partitions, kept in ``__share_group_state``, sans I/O apart from
its store.

The leader of partition N of ``__share_group_state`` is the share coordinator of every
share-partition key ("group:topicId:partition") hashing to N. It answers the share coordinator
APIs (InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87) from memory once N is loaded
(COORDINATOR_LOAD_IN_PROGRESS meanwhile, NOT_COORDINATOR for a partition it does not own).

Each write is merged into the stored state (Kafka's PersisterStateBatchCombiner: newer batches
win over the ranges they cover, what lies below the start offset goes) and stored as a
ShareSnapshot record; a leader epoch or state epoch older than the stored one is fenced
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH). ShareUpdate records written by a Kafka broker are
read back on top of their snapshot.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch, RecordBatchBuilder
from tidelog.server.coordinator.partition_writer import PartitionWriter
from tidelog.server.coordinator.record_codec import SchemaError
from tidelog.server.coordinator.runtime import CoordinatorPartitions
from tidelog.server.coordinator.share.records import (
    SNAPSHOT_KEY,
    ShareState,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    state_partition_for,
)
from tidelog.server.coordinator.share.uncommitted import StateKey, UncommittedStates
from tidelog.server.coordinator.store import OffsetsStore
from tidelog.util.clock import Clock

log = logging.getLogger(__name__)

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory
DEFAULT_STATE_EPOCH = 0
NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class StateResult:
    error: ErrorCode
    state: ShareState | None = None
    message: str | None = None


def combine_batches(current: Iterable[StateBatch], new: Iterable[StateBatch],
                    start_offset: int) -> tuple[StateBatch, ...]:
    """Kafka's PersisterStateBatchCombiner: ``new`` overrides what ``current`` says about the
    offsets it covers; nothing below ``start_offset`` is kept; neighbours with the same state
    and delivery count become one batch."""
    runs: list[StateBatch] = [b for b in current if b[1] >= start_offset]
    for first, last, state, count in new:
        if last < first:
            continue
        cut: list[StateBatch] = []
        for b in runs:
            if b[1] < first or b[0] > last:
                cut.append(b)
                continue
            if b[0] < first:
                cut.append((b[0], first - 1, b[2], b[3]))
            if b[1] > last:
                cut.append((last + 1, b[1], b[2], b[3]))
        cut.append((first, last, state, count))
        runs = cut
    out: list[StateBatch] = []
    for first, last, state, count in sorted(runs):
        first = max(first, start_offset)
        if last < first:
            continue
        if out and out[-1][1] == first - 1 and out[-1][2:] == (state, count):
            out[-1] = (out[-1][0], last, state, count)
        else:
            out.append((first, last, state, count))
    return tuple(out)


class ShareStateCoordinator:
    def __init__(self, store: OffsetsStore, num_partitions: int, clock: Clock, *,
                 partition_exists: Callable[[uuid.UUID, int], bool] | None = None) -> None:
        self.store = store
        self.num_partitions = num_partitions
        self.clock = clock
        self.partition_exists = partition_exists or (lambda _t, _p: True)
        self.states: dict[StateKey, ShareState] = {}
        self.leader_epochs: dict[StateKey, int] = {}
        self.partitions = CoordinatorPartitions()  # load states (the coordinator runtime's)
        # in a cluster reads answer the replicated state (uncommitted.py), and ``writer``'s
        # waits for replication commit the writes (wiring.state_replicated)
        self.confirm_writes = False
        self.writer: PartitionWriter | None = None
        self.uncommitted = UncommittedStates()

    def partition_for(self, key: StateKey) -> int:
        return state_partition_for(key[0], key[1], key[2], self.num_partitions)

    def key_error(self, key: StateKey) -> ErrorCode:
        p = self.partition_for(key)
        if p in self.partitions.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE if p in self.partitions.owned else ErrorCode.NOT_COORDINATOR

    def _check(self, key: StateKey) -> ErrorCode:
        if key[2] < 0:
            return ErrorCode.INVALID_REQUEST
        err = self.key_error(key)
        if err == ErrorCode.NONE and not self.partition_exists(key[1], key[2]):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return err

    # ------------------------------------------------------------------ the APIs

    def read(self, key: StateKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupState: the share-partition leader at ``leader_epoch`` reads its state
        (start offset -1 when none is stored); the epoch fences older leaders from then on."""
        err = self._check(key)
        if err == ErrorCode.NONE and self.leader_epochs.get(key, NO_EPOCH) > leader_epoch:
            err = ErrorCode.FENCED_LEADER_EPOCH
        if err != ErrorCode.NONE:
            return StateResult(err)
        state = self.uncommitted.view(key, self.states.get(key))
        if state is None:
            return StateResult(ErrorCode.NONE, ShareState(0, DEFAULT_STATE_EPOCH, NO_EPOCH,
                                                          UNINITIALIZED_START_OFFSET))
        # the reader's epoch fences older leaders from now on (kept in memory, as Kafka's
        # shard does; the new leader's first write stores it)
        self.leader_epochs[key] = max(self.leader_epochs.get(key, NO_EPOCH), leader_epoch)
        return StateResult(ErrorCode.NONE, state)

    def summary(self, key: StateKey) -> StateResult:
        """ReadShareGroupStateSummary: the stored start offset and epochs, fencing no one."""
        err = self._check(key)
        if err != ErrorCode.NONE:
            return StateResult(err)
        state = self.uncommitted.view(key, self.states.get(key))
        return StateResult(ErrorCode.NONE, state if state is not None else ShareState(
            0, DEFAULT_STATE_EPOCH, NO_EPOCH, UNINITIALIZED_START_OFFSET))

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Iterable[StateBatch]) -> ErrorCode:
        """WriteShareGroupState: merge ``batches`` into the stored state (-1 keeps the stored
        start offset / epoch)."""
        err = self._check(key)
        if err != ErrorCode.NONE:
            return err
        if self.leader_epochs.get(key, NO_EPOCH) > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        current = self.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if current is None:
            start = start_offset
            merged = combine_batches((), batches, start)
            state = ShareState(0, state_epoch, leader_epoch, start, merged)
        else:
            start = current.start_offset if start_offset == -1 else start_offset
            merged = combine_batches(current.batches, batches, start)
            state = ShareState(
                (current.snapshot_epoch + 1) & 0xFFFF,
                current.state_epoch if state_epoch == -1 else state_epoch,
                current.leader_epoch if leader_epoch == -1 else leader_epoch, start, merged)
        return self._store(key, state)

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: the share-partition starts over at ``start_offset``
        with ``state_epoch`` (which must not be older than the stored one)."""
        err = self._check(key)
        if err != ErrorCode.NONE:
            return err
        current = self.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        snapshot_epoch = 0 if current is None else (current.snapshot_epoch + 1) & 0xFFFF
        return self._store(key, ShareState(snapshot_epoch, state_epoch, NO_EPOCH,
                                           start_offset))

    def delete(self, key: StateKey) -> ErrorCode:
        """DeleteShareGroupState: a tombstone; the share-partition starts afresh next time."""
        err = self.key_error(key) if key[2] >= 0 else ErrorCode.INVALID_REQUEST
        if err != ErrorCode.NONE:
            return err
        if key not in self.states:
            return ErrorCode.NONE
        err = self._append(key, None, self.states.get(key), None)
        if err == ErrorCode.NONE:
            self.states.pop(key, None)
            self.leader_epochs.pop(key, None)
        return err

    def keys_of_group(self, group_id: str) -> list[StateKey]:
        return [k for k in self.states if k[0] == group_id]

    # ------------------------------------------------------------------ storage

    def _store(self, key: StateKey, state: ShareState) -> ErrorCode:
        err = self._append(key, encode_snapshot(state), self.states.get(key), state)
        if err == ErrorCode.NONE:
            self.states[key] = state
            self.leader_epochs[key] = max(self.leader_epochs.get(key, NO_EPOCH),
                                          state.leader_epoch)
        return err

    def _append(self, key: StateKey, value: bytes | None, before: ShareState | None,
                after: ShareState | None) -> ErrorCode:  # fmt: skip
        builder = RecordBatchBuilder()
        builder.append(self.clock.milliseconds(), encode_key(*key), value)
        partition = self.partition_for(key)
        try:
            base = self.store.append(partition, builder.build())
        except OSError as exc:
            log.warning("could not write share state of %s: %s", key, exc)
            return getattr(exc, "error", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if self.confirm_writes:  # committed once replicated (complete)
            self.uncommitted.staged(partition, base + 1, key, before, after)
        return ErrorCode.NONE

    def complete(self, partition: int, up_to: int | None, replicated: bool) -> None:
        """The wait for ``partition``'s writes up to ``up_to`` (None: all) ended."""
        self.uncommitted.complete(partition, up_to, replicated, self.states)

    def replay_batch(self, loaded: dict[StateKey, ShareState], batch: RecordBatch) -> None:
        """One batch of a partition being loaded: snapshots replace, updates merge, tombstones
        remove (Kafka's ShareCoordinatorShard.replay)."""
        if batch.is_control:
            return
        for rec in batch.iter_records():
            if rec.key is None:
                continue
            try:
                k = decode_key(rec.key)
                key = (k.group_id, k.topic_id, k.partition)
                if rec.value is None:
                    loaded.pop(key, None)
                elif k.version == SNAPSHOT_KEY:
                    loaded[key] = decode_value(rec.value, k.version)
                elif key in loaded:
                    loaded[key] = _apply_update(loaded[key], decode_value(rec.value, k.version))
            except (SchemaError, UnicodeDecodeError, ValueError) as exc:
                log.warning("skipping unreadable share state record: %s", exc)

    def install(self, partition: int, loaded: dict[StateKey, ShareState]) -> None:
        """A replayed partition's states; its keys are served from now on."""
        for key, state in loaded.items():
            self.states[key] = state
            self.leader_epochs[key] = state.leader_epoch
        self.partitions.activate(partition)
        log.info("loaded __share_group_state-%d (%d share-partitions)", partition, len(loaded))

    def load_now(self, partition: int) -> None:
        """Load ``partition`` in one go (one-broker mode at start)."""
        self.partitions.begin_load(partition)
        self.forget(partition)
        loaded: dict[StateKey, ShareState] = {}
        for batch in self.store.read_batches(partition):
            self.replay_batch(loaded, batch)
        self.install(partition, loaded)

    def forget(self, partition: int) -> int:
        """Drop ``partition``'s states (loading it again, or another broker leads it)."""
        gone = [k for k in self.states if self.partition_for(k) == partition]
        self.uncommitted.forget(partition, [k for k in self.uncommitted.committed
                                            if self.partition_for(k) == partition])
        for key in gone:
            del self.states[key]
            self.leader_epochs.pop(key, None)
        return len(gone)


def _apply_update(base: ShareState, update: ShareState) -> ShareState:
    start = base.start_offset if update.start_offset == -1 else update.start_offset
    return ShareState(base.snapshot_epoch, base.state_epoch,
                      base.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
                      start, combine_batches(base.batches, update.batches, start))
