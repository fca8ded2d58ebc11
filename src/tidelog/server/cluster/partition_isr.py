"""A leader's ISR changes (Kafka's Partition: maybeExpandIsr, maybeShrinkIsr, the
AlterPartition it sends and handleAlterPartitionResult), a mixin of the ``Partition``: a
change is proposed to the controller through the ``AlterPartitionSender``, the state pending
meanwhile, and counts only once the controller committed it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from tidelog.metrics.isr import ISR_CHANGE_STATS
from tidelog.protocol.errors import ErrorCode
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from .partition_state import LeaderAndIsr, PartitionState
from .replica import Replica

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger("tidelog.server.cluster.partition")


class AlterPartitionSender(Protocol):
    def submit(self, tp: TopicPartition,
               leader_and_isr: LeaderAndIsr) -> Awaitable[LeaderAndIsr | ErrorCode]:
        """Send the proposed state to the controller; the committed state, or its error."""
        ...


class PartitionIsrChanges:
    """The ISR changes of a ``Partition`` leading here (on the event loop)."""

    topic_partition: TopicPartition
    log: Log
    local_broker_id: int
    clock: Clock
    replica_lag_time_max_ms: int
    alter_partition_sender: AlterPartitionSender | None
    on_high_watermark: Callable[[TopicPartition], object] | None
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    leader_epoch_start_offset: int | None
    remote_replicas: dict[int, Replica]
    state: PartitionState
    _alter_task: asyncio.Task[None] | None

    def maybe_increment_leader_hw(self, now_ms: int | None = None,
                                  leader_end: int | None = None) -> bool:
        raise NotImplementedError  # the Partition's

    def maybe_expand_isr(self, replica: Replica, now_ms: int) -> None:
        """A follower outside the ISR that reached the high watermark (and this leader
        epoch's start) joins it, through the controller."""
        if (self.state.in_flight or replica.broker_id in self.state.isr
                or self.alter_partition_sender is None):
            return
        start = self.leader_epoch_start_offset or 0
        if replica.log_end_offset < self.log.high_watermark or replica.log_end_offset < start:
            return
        self._submit(self.state.pending_expand(replica.broker_id),
                     self.state.isr | {replica.broker_id})

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        """ISR members not caught up for ``replica.lag.time.max.ms``."""
        end = self.log.log_end_offset
        return frozenset(
            r for r in self.state.isr
            if r != self.local_broker_id and r in self.remote_replicas
            and not self.remote_replicas[r].is_caught_up(end, now_ms, self.replica_lag_time_max_ms)
        )

    def maybe_shrink_isr(self, now_ms: int | None = None) -> bool:
        """Propose the ISR without its lagging members (Kafka's isr-expiration task); True
        when a change was sent."""
        if (self.leader_id != self.local_broker_id or self.state.in_flight
                or self.alter_partition_sender is None):
            return False
        now = self.clock.milliseconds() if now_ms is None else now_ms
        out = self.out_of_sync_replicas(now)
        if not out:
            return False
        log.info("Shrinking ISR of %s from %s to %s (lagging: %s)", self.topic_partition,
                 sorted(self.state.isr), sorted(self.state.isr - out), sorted(out))
        self._submit(self.state.pending_shrink(), self.state.isr - out)
        return True

    def _submit(self, pending: PartitionState, isr: frozenset[int]) -> None:
        sender = self.alter_partition_sender
        assert sender is not None
        proposed = LeaderAndIsr(self.local_broker_id, self.leader_epoch,
                                tuple(sorted(isr)), self.partition_epoch)
        self.state = pending
        result = sender.submit(self.topic_partition, proposed)
        self._alter_task = asyncio.ensure_future(self._await_alter(result, proposed))

    async def _await_alter(self, result: Awaitable[LeaderAndIsr | ErrorCode],
                           proposed: LeaderAndIsr) -> None:
        try:
            outcome = await result
        except Exception:
            log.warning("AlterPartition for %s failed", self.topic_partition, exc_info=True)
            outcome = ErrorCode.UNKNOWN_SERVER_ERROR
        self.handle_alter_partition_result(proposed, outcome)

    def handle_alter_partition_result(self, proposed: LeaderAndIsr,
                                      outcome: LeaderAndIsr | ErrorCode) -> None:
        """The controller's answer: a committed state replaces ours (if it is for our leader
        epoch); an error drops the pending change (it is proposed again later)."""
        if not self.state.in_flight or proposed.leader_epoch != self.leader_epoch:
            return  # a LeaderAndIsr came first: its state is newer
        if isinstance(outcome, ErrorCode):
            log.info("ISR change of %s to %s not committed: %s", self.topic_partition,
                     list(proposed.isr), outcome.name)
            self.state = PartitionState.committed(self.state.isr)
            return
        if outcome.leader_epoch != self.leader_epoch:
            return
        self.partition_epoch = outcome.partition_epoch
        ISR_CHANGE_STATS.record(self.state.isr, outcome.isr)
        self.state = PartitionState.committed(frozenset(outcome.isr))
        self.maybe_increment_leader_hw(self.clock.milliseconds())
        if self.on_high_watermark is not None:  # DelayedProduce rechecks min.insync.replicas
            self.on_high_watermark(self.topic_partition)
