"""Kafka's replication gauges, computed from the hosted partitions (ReplicaManager
UnderReplicatedPartitions, UnderMinIsrPartitionCount, AtMinIsrPartitionCount: partitions led
here whose ISR is smaller than their assignment, smaller than min.insync.replicas, or exactly
that size)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class LedPartition(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def isr(self) -> frozenset[int]: ...

    @property
    def assignment(self) -> tuple[int, ...]: ...

    @property
    def min_insync_replicas(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ReplicationGauges:
    under_replicated: int = 0
    under_min_isr: int = 0
    at_min_isr: int = 0


def replication_gauges(partitions: Iterable[LedPartition]) -> ReplicationGauges:
    under = below = at = 0
    for p in partitions:
        if not p.is_leader:
            continue
        size = len(p.isr)
        under += size < len(p.assignment)
        min_isr = p.min_insync_replicas
        below += size < min_isr
        at += size == min_isr
    return ReplicationGauges(under, below, at)
