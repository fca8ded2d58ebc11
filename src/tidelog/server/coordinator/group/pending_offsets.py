"""Pending transactional offsets (the pending half of Kafka's OffsetMetadataManager).

TxnOffsetCommit appends offsets to a group's ``__consumer_offsets`` partition as a
*transactional* batch of the producer and keeps them here: OffsetFetch does not see them.
The transaction coordinator's COMMIT marker on that partition makes them the group's
committed offsets; an ABORT marker drops them. Loading replays the same rules: transactional
records count only once their COMMIT marker is read; those still undecided at the end of the
log become pending again.

This module knows offsets and record batches only, never a group kind: every group kind
(classic, consumer) commits offsets through it, so it sits low, beside the committed offsets
and the ``__consumer_offsets`` schemas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from tidelog.records import RecordBatch
from tidelog.records.batch import ControlRecordType
from tidelog.server.coordinator.group.records import (
    OffsetAndMetadata,
    OffsetKey,
    decode_key,
    decode_offset_value,
)
from tidelog.server.coordinator.record_codec import SchemaError
from tidelog.util.topic_partition import TopicPartition

GroupOffsets = dict[str, dict[TopicPartition, OffsetAndMetadata]]
# producer id -> raw key -> (offset, value): transactional records waiting for their marker
TxnRecords = dict[int, dict[bytes, tuple[int, bytes | None]]]
Latest = dict[bytes, tuple[int, bytes | None]]


@dataclass
class LoadedPartition:
    """A partition being replayed: raw last value per key first (cheap, in log order), then
    decoded once per surviving key by the metadata manager."""

    latest: Latest = field(default_factory=dict)
    # transactional offset records waiting for their producer's marker
    txn_pending: TxnRecords = field(default_factory=dict)


class PendingTxnOffsets:
    """Offsets of open transactions: producer id -> group id -> partition -> offset."""

    def __init__(self) -> None:
        self.by_producer: dict[int, GroupOffsets] = {}
        # partition -> producer id -> commit?: markers that landed while the partition loaded
        self.decisions: dict[int, dict[int, bool]] = {}

    def add(self, producer_id: int, group_id: str,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        mine = self.by_producer.setdefault(producer_id, {})
        mine.setdefault(group_id, {}).update(offsets)

    def fail(self, producer_id: int, group_id: str, tps: Iterable[TopicPartition]) -> None:
        """A TxnOffsetCommit whose write was not replicated: its offsets are not pending
        (Kafka's failPendingTxnOffsetCommit)."""
        groups = self.by_producer.get(producer_id, {})
        offsets = groups.get(group_id, {})
        for tp in tps:
            offsets.pop(tp, None)
        if not offsets:
            groups.pop(group_id, None)
        if not groups:
            self.by_producer.pop(producer_id, None)

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for these."""
        return any(tp in g.get(group_id, {}) for g in self.by_producer.values())

    def complete(self, producer_id: int, commit: bool, partition: int, loading: bool,
                 partition_for: Callable[[str], int]) -> GroupOffsets:
        """The producer's marker reached ``partition``: its offsets for the groups of that
        partition leave the pending set; returned to be applied when ``commit``."""
        if loading:
            # the loader may have read past the partition's end before the marker landed:
            # it settles the transaction when it installs what it read (``install``)
            self.decisions.setdefault(partition, {})[producer_id] = commit
        groups = self.by_producer.get(producer_id)
        if not groups:
            return {}
        decided: GroupOffsets = {}
        for group_id in [g for g in groups if partition_for(g) == partition]:
            offsets = groups.pop(group_id)
            if commit:
                decided[group_id] = offsets
        if not groups:
            self.by_producer.pop(producer_id, None)
        return decided

    def forget_partition(self, partition: int, partition_for: Callable[[str], int]) -> None:
        """Another broker coordinates ``partition`` now: its groups' pending offsets go."""
        self.decisions.pop(partition, None)
        for pid in list(self.by_producer):
            groups = self.by_producer[pid]
            for group_id in [g for g in groups if partition_for(g) == partition]:
                del groups[group_id]
            if not groups:
                del self.by_producer[pid]

    def install(self, loaded: LoadedPartition, partition: int) -> None:
        """Transactions still undecided at the end of what the loader read: their offsets wait
        again, unless their marker landed while the partition was loading."""
        decided = self.decisions.pop(partition, {})
        for pid in [p for p in loaded.txn_pending if p in decided]:
            records = loaded.txn_pending.pop(pid)
            if decided[pid]:
                _apply(loaded.latest, records)
        for pid, records in loaded.txn_pending.items():
            for key, (_, value) in records.items():
                try:
                    k = decode_key(key)
                    if not isinstance(k, OffsetKey) or value is None:
                        continue
                    o = decode_offset_value(value)
                except (SchemaError, UnicodeDecodeError):
                    continue
                self.add(pid, k.group, {TopicPartition(k.topic, k.partition): o})
        loaded.txn_pending.clear()


def replay_txn_batch(loaded: LoadedPartition, batch: RecordBatch) -> None:
    """A transactional batch of ``__consumer_offsets`` during load: data waits for its
    producer's marker; COMMIT moves it into the partition's last-value map, ABORT drops it."""
    pid = batch.producer_id
    if batch.is_control:
        records = loaded.txn_pending.pop(pid, {})
        if batch.control_type() is ControlRecordType.COMMIT:
            _apply(loaded.latest, records)
        return
    mine = loaded.txn_pending.setdefault(pid, {})
    for rec in batch.iter_records():
        if rec.key is not None:
            mine[rec.key] = (rec.offset, rec.value)


def _apply(latest: Latest, records: Mapping[bytes, tuple[int, bytes | None]]) -> None:
    for key, val in records.items():
        latest.pop(key, None)  # keep dict order = order of the last write
        latest[key] = val
