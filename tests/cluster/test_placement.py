"""Replica placement as Kafka's AdminUtils places replicas (expected values from Kafka's tests)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.server.metadata.replica_placement import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    new_partitions_assignment,
    rack_alternated_broker_list,
)


def _brokers(racks: Mapping[int, str | None]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in sorted(racks.items())]


def test_rack_unaware_matches_kafka() -> None:
    # AdminUtilsTest.testReplicaAssignment
    brokers = [BrokerMetadata(b) for b in range(5)]
    assert assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip


def test_rack_alternated_list_and_rack_aware_assignment_match_kafka() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({k: v for k, v in racks.items() if k != 5}) == [0, 3, 1, 4, 2]
    got = assign_replicas_to_brokers(_brokers(racks), 7, 3, fixed_start_index=0, start_partition_id=0)
    assert got == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
        6: [0, 4, 2],
    }  # fmt: skip


def test_twelve_partitions_on_three_brokers_lead_four_each() -> None:
    brokers = [BrokerMetadata(b) for b in (1, 2, 3)]
    for seed in range(20):
        got = assign_replicas_to_brokers(brokers, 12, 3, rng=random.Random(seed))
        assert Counter(r[0] for r in got.values()) == {1: 4, 2: 4, 3: 4}
        assert all(sorted(r) == [1, 2, 3] for r in got.values())


@given(
    racks=st.dictionaries(st.integers(0, 20), st.sampled_from("abc"), min_size=1, max_size=9),
    partitions=st.integers(1, 40),
    rf=st.integers(1, 4),
    seed=st.integers(0, 1000),
)
def test_rack_aware_spreads_replicas_over_racks(racks: dict[int, str], partitions: int, rf: int, seed: int) -> None:
    if rf > len(racks):
        with pytest.raises(InvalidReplicationFactorError):
            assign_replicas_to_brokers(_brokers(racks), partitions, rf)
        return
    got = assign_replicas_to_brokers(_brokers(racks), partitions, rf, rng=random.Random(seed))
    assert sorted(got) == list(range(partitions))
    n_racks = len(set(racks.values()))
    for replicas in got.values():
        assert len(set(replicas)) == rf  # distinct brokers
        # one replica per rack while racks without one remain
        assert len({racks[b] for b in replicas}) == min(rf, n_racks)


def test_errors() -> None:
    brokers = [BrokerMetadata(1), BrokerMetadata(2)]
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers(brokers, 1, 3)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(brokers, 0, 1)
    with pytest.raises(AdminOperationError):
        assign_replicas_to_brokers([BrokerMetadata(1, "r"), BrokerMetadata(2)], 1, 1)


def test_new_partitions_continue_from_partition_zeros_leader() -> None:
    brokers = [BrokerMetadata(b) for b in range(5)]
    existing = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=1)
    added = new_partitions_assignment(brokers, existing, 6)
    assert sorted(added) == [3, 4, 5]
    assert all(len(r) == 2 for r in added.values())
    # AdminZkClient: start index = partition 0's first replica, partitions numbered on
    assert added == assign_replicas_to_brokers(
        brokers, 3, 2, fixed_start_index=existing[0][0], start_partition_id=3
    )
    with pytest.raises(InvalidPartitionsError):
        new_partitions_assignment(brokers, existing, 3)
