"""Leader election (Kafka's PartitionLeaderElectionAlgorithms and Election), pure.

Each function takes the partition's assignment, its current leader/ISR and the live
brokers, and returns the new state (leader epoch bumped) or None when no replica qualifies
(the partition stays as it is: offline when its leader is gone).

An unclean election (a leader from outside the ISR, when ``unclean.leader.election.enable``
allows it or ElectLeaders asks UNCLEAN) is told apart by ``is_unclean`` and counted in
``ControllerStats`` (Kafka's UncleanLeaderElectionsPerSec, exported as a total).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tidelog.server.zk.data import LEADER_RECOVERING, LeaderIsrAndControllerEpoch


def offline_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean: bool
) -> int | None:
    """First live ISR member in assignment order; with unclean election enabled, else the
    first live replica."""
    leader = next((b for b in assignment if b in live and b in isr), None)
    if leader is None and unclean:
        leader = next((b for b in assignment if b in live), None)
    return leader


def is_unclean(old: LeaderIsrAndControllerEpoch, new: LeaderIsrAndControllerEpoch) -> bool:
    """The new leader was not in the ISR it was elected from: what it lacked is lost."""
    return new.leader not in old.isr


@dataclass
class ControllerStats:
    """Kafka's ControllerStats meters that tidelog keeps (as totals): kept by the controller
    across resignations, as Kafka's are."""

    unclean_leader_elections: int = 0

    def record_unclean_elections(self, count: int) -> None:
        self.unclean_leader_elections += count


def reassign_partition_leader(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int | None:
    return next((b for b in target if b in live and b in isr), None)


def preferred_replica_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]) -> int | None:
    """Only the preferred (first) replica, and only when it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    return next(
        (b for b in assignment if b in live and b in isr and b not in shutting_down), None
    )


def elect_for_offline(
    state: LeaderIsrAndControllerEpoch,
    assignment: Sequence[int],
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> LeaderIsrAndControllerEpoch | None:
    """Election.leaderForOffline: a clean leader keeps the live part of the ISR; an unclean
    one starts a new ISR of itself and marks the partition RECOVERING."""
    leader = offline_partition_leader(assignment, state.isr, live, unclean)
    if leader is None:
        return None
    if leader in state.isr:
        return _next(state, leader, [b for b in state.isr if b in live], controller_epoch)
    return _next(state, leader, [leader], controller_epoch, LEADER_RECOVERING)


def elect_preferred(
    state: LeaderIsrAndControllerEpoch, assignment: Sequence[int], live: Collection[int],
    controller_epoch: int,
) -> LeaderIsrAndControllerEpoch | None:  # fmt: skip
    leader = preferred_replica_leader(assignment, state.isr, live)
    return None if leader is None else _next(state, leader, state.isr, controller_epoch)


def elect_for_reassignment(
    state: LeaderIsrAndControllerEpoch, target: Sequence[int], live: Collection[int],
    controller_epoch: int,
) -> LeaderIsrAndControllerEpoch | None:  # fmt: skip
    leader = reassign_partition_leader(target, state.isr, live)
    return None if leader is None else _next(state, leader, state.isr, controller_epoch)


def elect_for_controlled_shutdown(
    state: LeaderIsrAndControllerEpoch,
    assignment: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> LeaderIsrAndControllerEpoch | None:
    """The stopping brokers leave the ISR; live includes them (they still run)."""
    leader = controlled_shutdown_leader(assignment, state.isr, live, shutting_down)
    if leader is None:
        return None
    isr = [b for b in state.isr if b not in shutting_down]
    return _next(state, leader, isr, controller_epoch)


def _next(
    state: LeaderIsrAndControllerEpoch,
    leader: int,
    isr: Sequence[int],
    controller_epoch: int,
    recovery: int | None = None,
) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        leader_recovery_state=state.leader_recovery_state if recovery is None else recovery,
        zk_version=state.zk_version,
    )
