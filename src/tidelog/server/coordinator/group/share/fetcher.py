"""One share-partition's part of a ShareFetch: read the leader's Partition from the first
available offset, acquire the available records the read covers batch by batch (a batch
whole, even past ``max_records``, as Kafka), and answer the batches that hold them.

The batches stay bytes: a batch may hold records another member holds or that were already
acknowledged; the client delivers only the ranges it is told it acquired (Kafka's rule).
Control batches (transaction markers) are no records to deliver: they are archived, and so,
under ``share.isolation.level=read_committed``, are the records of aborted transactions; that
level also stops at the last stable offset.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.records import iter_batches
from tidelog.server.cluster.partition import Partition
from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator
from tidelog.server.coordinator.group.share.partition import AcquiredRange
from tidelog.storage.log_read import FetchIsolation
from tidelog.util.topic_partition import TopicPartition


@dataclass
class Fetched:
    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)


def fetch_partition(share: ShareGroupCoordinator, partition: Partition, group_id: str, member_id: str,
                    tp: TopicPartition, topic_id: uuid.UUID, max_records: int,
                    max_bytes: int) -> Fetched:
    hw = partition.high_watermark
    earliest = share.settings.get(group_id, "share.auto.offset.reset") == "earliest"
    sp = share.share_partition(group_id, tp, partition.log_start_offset if earliest else hw,
                               topic_id)
    # the group's cap of records acquired at once (a group config: may change meanwhile)
    sp.max_locks = share.settings.number(group_id, "share.partition.max.record.locks")
    committed = share.settings.get(group_id, "share.isolation.level") == "read_committed"
    isolation = FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK
    if committed:
        hw = min(hw, partition.last_stable_offset)
    if sp.start_offset < partition.log_start_offset:  # deleted under us: skip to what is left
        sp.archive(range(sp.start_offset, partition.log_start_offset))
    start = sp.next_available()
    if start >= hw or max_records <= 0:
        return Fetched()
    info = partition.read_records(start, max(max_bytes, 1), isolation, True)
    data = info.records.read() if info.records is not None else b""
    aborted = list(info.aborted_transactions or []) if committed else []
    batches: list[range] = []  # acquired whole (Kafka: max_records is a soft limit)
    ends: list[tuple[int, int]] = []  # (last offset, end position) per batch
    control: list[int] = []
    pos, expected = 0, start
    for batch in iter_batches(data, validate=False):
        pos += batch.size_in_bytes
        control.extend(range(expected, batch.base_offset))  # offsets compaction removed
        expected = batch.last_offset + 1
        last = min(batch.last_offset, hw - 1)
        span = range(max(batch.base_offset, start), last + 1)
        skip = batch.is_control or (batch.is_transactional and any(
            a.producer_id == batch.producer_id and a.first_offset <= batch.base_offset
            <= a.last_offset for a in aborted))
        if skip:
            control.extend(span)
        else:
            batches.append(span)
        ends.append((batch.last_offset, pos))
    sp.archive(control)
    acquired = sp.acquire_batches(member_id, batches, max_records)
    if not acquired:
        return Fetched()
    last_acquired = acquired[-1][1]
    end = next((p for last, p in ends if last >= last_acquired), pos)
    return Fetched(ErrorCode.NONE, bytes(data[:end]), acquired)
