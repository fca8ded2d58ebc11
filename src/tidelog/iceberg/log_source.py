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
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.records.batch import CONTROL_MASK
from tidelog.storage.file_records import FileRecords
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.reader_txn import filter_aborted
from tidelog.util.topic_partition import TopicPartition

from .file_ranges import FileRange, ranges_of

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager


@dataclass(frozen=True)
class Leadership:
    leader_epoch: int
    log_start_offset: int
    last_stable_offset: int


@dataclass
class CommittedRead:
    ranges: list[FileRange]  # where the data batches of committed transactions (and plain
    # ones) are in the segment file, adjacent ones in one range
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
        """Where the committed batches from ``start`` are (at most about ``max_bytes``, at
        least one batch when there is one): only their headers are read here. Runs on any
        thread: a log's reads take no lock."""
        partition = self._rm.get_partition(tp)
        if partition is None:
            return CommittedRead([], start)
        # the partition's read door (Kafka's Partition.readRecords), bounded by the LSO
        info = partition.read_records(start, max_bytes, FetchIsolation.TXN_COMMITTED, True)
        records = info.records
        if records.size == 0:
            return CommittedRead([], start)
        fd = records.fileno()
        file = FileRecords(Path(records.path or "?"), fd, records.position + records.size)
        heads = list(file.headers(records.position))
        if not heads:
            return CommittedRead([], start)
        next_offset = heads[-1].next_offset
        if info.aborted_transactions:  # the consumer's filter, on the batches themselves
            kept = {b.position for b in filter_aborted(records.batches(),
                                                       info.aborted_transactions, start)}
            heads = [h for h in heads if h.position in kept]
        data = [h for h in heads if not h.attributes & CONTROL_MASK and h.next_offset > start]
        return CommittedRead(ranges_of(fd, data), next_offset)

    def set_retention_floor(self, tp: TopicPartition, floor: Callable[[], int | None] | None
                            ) -> bool:
        """Put ``floor`` under the partition's local retention (None: take it away)."""
        lg = self._rm.get_log(tp)
        if lg is None:
            return False
        lg.retention_floor = floor
        return True
