"""ISR changes committed by the controller for partitions this broker leads (Kafka's
ReplicaManager IsrShrinksPerSec / IsrExpandsPerSec meters; exported as totals)."""

from __future__ import annotations

from collections.abc import Collection


class IsrChangeStats:
    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def record(self, old: Collection[int], new: Collection[int]) -> None:
        if len(new) > len(old):
            self.expands += 1
        elif len(new) < len(old):
            self.shrinks += 1


ISR_CHANGE_STATS = IsrChangeStats()
