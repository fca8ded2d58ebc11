"""Leader election rules (Kafka's PartitionLeaderElectionAlgorithms and Election)."""

from __future__ import annotations

from tidelog.server.controller import election as e
from tidelog.server.zk.data import (
    LEADER_RECOVERED,
    LEADER_RECOVERING,
    LeaderIsrAndControllerEpoch,
)


def _state(leader: int, isr: tuple[int, ...], epoch: int = 5) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(leader, epoch, isr, controller_epoch=1, zk_version=9)


def test_offline_takes_first_live_isr_member_in_assignment_order() -> None:
    assert e.offline_partition_leader([3, 1, 2], isr=[1, 2], live={1, 2}, unclean=False) == 1
    new = e.elect_for_offline(_state(3, (3, 2, 1)), [3, 2, 1], live={1, 2}, unclean=False,
                              controller_epoch=4)  # fmt: skip
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (2, (2, 1), 6, 4)
    assert new.zk_version == 9 and new.leader_recovery_state == LEADER_RECOVERED


def test_no_isr_member_alive_leaves_the_partition_offline_unless_unclean() -> None:
    state = _state(1, (1,))
    assert e.elect_for_offline(state, [1, 2, 3], live={2, 3}, unclean=False, controller_epoch=1) is None
    new = e.elect_for_offline(state, [1, 2, 3], live={2, 3}, unclean=True, controller_epoch=1)
    assert new is not None
    assert (new.leader, new.isr, new.leader_recovery_state) == (2, (2,), LEADER_RECOVERING)
    assert e.elect_for_offline(state, [1, 2], live=set(), unclean=True, controller_epoch=1) is None


def test_preferred_is_only_the_first_replica() -> None:
    assert e.preferred_replica_leader([2, 1, 3], isr=[1, 2, 3], live={1, 2, 3}) == 2
    assert e.preferred_replica_leader([2, 1, 3], isr=[1, 3], live={1, 2, 3}) is None
    assert e.preferred_replica_leader([2, 1, 3], isr=[1, 2, 3], live={1, 3}) is None
    new = e.elect_preferred(_state(1, (1, 2)), [2, 1], live={1, 2}, controller_epoch=2)
    assert new is not None and (new.leader, new.isr, new.leader_epoch) == (2, (1, 2), 6)


def test_controlled_shutdown_moves_leadership_and_shrinks_isr() -> None:
    new = e.elect_for_controlled_shutdown(
        _state(1, (1, 2, 3)), [1, 2, 3], live={1, 2, 3}, shutting_down={1}, controller_epoch=1
    )
    assert new is not None and (new.leader, new.isr) == (2, (2, 3))
    assert e.elect_for_controlled_shutdown(
        _state(1, (1,)), [1, 2], live={1, 2}, shutting_down={1}, controller_epoch=1
    ) is None


def test_reassignment_takes_first_live_isr_member_of_target() -> None:
    assert e.reassign_partition_leader([4, 5, 1], isr=[1, 5], live={1, 4, 5}) == 5
    new = e.elect_for_reassignment(_state(1, (1, 5)), [4, 5, 1], live={1, 5}, controller_epoch=1)
    assert new is not None and new.leader == 5 and new.isr == (1, 5)
