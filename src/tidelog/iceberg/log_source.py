"""The one door through which translation reads a partition's log: committed records only
(Kafka's read_committed: below the last stable offset, the batches of aborted transactions
left out by the aborted-transaction index exactly as a read_committed consumer leaves them
out), whether this broker leads the partition and in which epoch, and the retention floor
translation puts under the log.

Everything translation knows of the broker's partitions goes through this module, so a change
of the broker's read path changes this file only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelog.records import RecordBatch
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.reader_txn import filter_aborted
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager


@dataclass(frozen=True)
class Leadership:
    leader_epoch: int
    log_start_offset: int
    last_stable_offset: int


@dataclass
class CommittedRead:
    batches: list[RecordBatch]  # data batches of committed transactions (and plain ones)
    next_offset: int  # where the next read starts (past control and aborted batches too)


class PartitionSource:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._rm = replica_manager

    def topic_partitions(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` this broker hosts (leader or follower)."""
        info = self._rm.topic(topic)
        if info is None:
            return []
        return [tp for tp in (TopicPartition(topic, p) for p in range(info.partitions))
                if self._rm.get_partition(tp) is not None]

    def leadership(self, tp: TopicPartition) -> Leadership | None:
        """The partition's state if this broker leads it, else None."""
        partition = self._rm.get_partition(tp)
        if partition is None or not partition.is_leader:
            return None
        lg = partition.log
        return Leadership(partition.leader_epoch, lg.log_start_offset, lg.last_stable_offset)

    def read_committed(self, tp: TopicPartition, start: int, max_bytes: int) -> CommittedRead:
        """Committed batches from ``start`` (at most about ``max_bytes``, at least one batch
        when there is one). Runs on any thread: a log's reads take no lock."""
        partition = self._rm.get_partition(tp)
        if partition is None:
            return CommittedRead([], start)
        # the partition's read door (Kafka's Partition.readRecords), bounded by the LSO
        info = partition.read_records(start, max_bytes, FetchIsolation.TXN_COMMITTED, True)
        batches = list(info.records.batches())
        if not batches:
            return CommittedRead([], start)
        next_offset = batches[-1].next_offset
        kept = [b for b in filter_aborted(batches, info.aborted_transactions or [], start)
                if not b.is_control and b.next_offset > start]
        return CommittedRead(kept, next_offset)

    def set_retention_floor(self, tp: TopicPartition, floor: Callable[[], int | None] | None
                            ) -> bool:
        """Put ``floor`` under the partition's local retention (None: take it away)."""
        lg = self._rm.get_log(tp)
        if lg is None:
            return False
        lg.retention_floor = floor
        return True
