"""Replica placement: Kafka's AdminUtils.assignReplicasToBrokers (pure).

Round robin from a random start broker: partition p's first replica is broker
``(p + start) % n``; its followers are shifted by ``next_replica_shift``, which grows by one
every ``n`` partitions so followers spread too. With racks the broker list alternates racks
and a partition takes at most one replica per rack while racks without one remain.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class InvalidPartitionsError(ValueError):
    """INVALID_PARTITIONS."""


class InvalidReplicationFactorError(ValueError):
    """INVALID_REPLICATION_FACTOR."""


class AdminOperationError(ValueError):
    """Kafka's AdminOperationException (some brokers have a rack, some not)."""


@dataclass(frozen=True)
class BrokerMetadata:
    broker_id: int
    rack: str | None = None


def replica_index(first_replica_index: int, second_replica_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_replica_shift + index) % (n - 1)
    return (first_replica_index + shift) % n


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """{partition: replicas} for ``n_partitions`` partitions numbered from
    ``max(0, start_partition_id)``; ``brokers`` in broker-id order as Kafka lists them."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    r = rng or random.Random()
    if all(b.rack is None for b in brokers):
        ids = [b.broker_id for b in brokers]
        return _rack_unaware(n_partitions, replication_factor, ids, fixed_start_index,
                             start_partition_id, r)  # fmt: skip
    if any(b.rack is None for b in brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    racks = {b.broker_id: str(b.rack) for b in brokers}
    return _rack_aware(n_partitions, replication_factor, racks, fixed_start_index,
                       start_partition_id, r)  # fmt: skip


def _starts(n: int, fixed_start_index: int, r: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = r.randrange(n)
    return start, r.randrange(n)


def _rack_unaware(
    n_partitions: int, rf: int, ids: list[int], fixed: int, start_pid: int, r: random.Random
) -> dict[int, list[int]]:
    n = len(ids)
    start_index, shift = _starts(n, fixed, r)
    out: dict[int, list[int]] = {}
    pid = max(0, start_pid)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        out[pid] = [ids[first]] + [ids[replica_index(first, shift, j, n)] for j in range(rf - 1)]
        pid += 1
    return out


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn, racks sorted by name, brokers by id in a rack."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = {rack: sorted(ids) for rack, ids in by_rack.items()}
    names = sorted(queues)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        queue = queues[names[i]]
        if queue:
            out.append(queue.pop(0))
        i = (i + 1) % len(names)
    return out


def _rack_aware(
    n_partitions: int, rf: int, racks: Mapping[int, str], fixed: int, start_pid: int,
    r: random.Random,
) -> dict[int, list[int]]:  # fmt: skip
    num_racks = len(set(racks.values()))
    arranged = rack_alternated_broker_list(racks)
    n = len(arranged)
    start_index, shift = _starts(n, fixed, r)
    out: dict[int, list[int]] = {}
    pid = max(0, start_pid)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = arranged[first]
        replicas, racks_used, brokers_used = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # skip a rack already holding one while others hold none; likewise a broker
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out


def new_partitions_assignment(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    total_partitions: int,
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """CreatePartitions (AdminZkClient.createNewPartitionsAssignment): the added partitions
    keep partition 0's replication factor and continue the round robin from its leader."""
    if total_partitions <= len(existing):
        raise InvalidPartitionsError(
            f"Topic currently has {len(existing)} partitions, {total_partitions} would not be an "
            "increase."
        )
    first = list(existing.get(0, ()))
    if not first:
        raise AdminOperationError("the topic has no partition 0")
    start = next((i for i, b in enumerate(brokers) if b.broker_id >= first[0]), 0)
    return assign_replicas_to_brokers(
        brokers, total_partitions - len(existing), len(first), fixed_start_index=start,
        start_partition_id=len(existing), rng=rng,
    )  # fmt: skip
