"""Pure partition state (Kafka's LeaderAndIsrPartitionState, LeaderAndIsr and
PartitionState): what the controller told a broker, what a leader asks the controller to
change, and the leader's view of its ISR while a change is in flight."""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode

NO_LEADER = -1
NO_EPOCH = -1  # a request that names no leader epoch (Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH)


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """One partition of a LeaderAndIsr request (key 4)."""

    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The state an AlterPartition proposes, or the controller committed (Kafka's
    LeaderAndIsr)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The ISR a leader works with. ``isr`` is the committed ISR; ``maximal_isr`` adds the
    replicas of an expansion in flight (they count for the high watermark at once, as Kafka's
    PendingExpandIsr) and keeps the ones of a shrink in flight (they still count until the
    controller commits: PendingShrinkIsr). ``in_flight``: an AlterPartition is pending."""

    isr: frozenset[int]
    maximal_isr: frozenset[int]
    in_flight: bool = False

    @staticmethod
    def committed(isr: frozenset[int]) -> PartitionState:
        return PartitionState(isr, isr)

    def pending_expand(self, replica: int) -> PartitionState:
        return PartitionState(self.isr, self.isr | {replica}, True)

    def pending_shrink(self) -> PartitionState:
        return PartitionState(self.isr, self.isr, True)


def leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode | None:
    """Kafka's Partition.validateLeaderEpoch: a request naming an older epoch than ours is
    FENCED_LEADER_EPOCH (its sender's metadata is stale), a newer one UNKNOWN_LEADER_EPOCH
    (ours is); NO_EPOCH skips the check."""
    if current_leader_epoch in (NO_EPOCH, leader_epoch):
        return None
    if current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def high_watermark_candidate(local_end: int, remote_ends: dict[int, int],
                             counted: frozenset[int]) -> int:
    """The smallest log end offset among the leader (``local_end``: its LEO, or what a
    durable group commit has flushed) and the ``counted`` remote replicas."""
    hw = local_end
    for broker_id, end in remote_ends.items():
        if broker_id in counted and end < hw:
            hw = end
    return hw
