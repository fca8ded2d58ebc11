"""One transactional id's state (Kafka's TransactionMetadata and TransactionState).

The coordinator runs on the broker's event loop and never awaits between deciding a
transition and writing it, so the "pending state" Kafka keeps for concurrent requests is
only needed while markers are being written (``pending`` below)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tidelog.util.topic_partition import TopicPartition

from .records import TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 0x7FFF


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState ids, as written in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        for s in cls:
            if s.kafka_name == name:
                return s
        return None


PREPARED = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
COMPLETED = (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT,
             TransactionState.EMPTY)


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= SHORT_MAX - 1


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # markers are being written: other requests get CONCURRENT_TRANSACTIONS meanwhile
    pending: bool = False

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def to_value(self) -> TransactionLogValue:
        parts: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            parts.setdefault(tp.topic, []).append(tp.partition)
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            transaction_status=int(self.state),
            # Kafka writes null partitions for Empty (and Complete*: the set is cleared)
            transaction_partitions=parts if self.state != TransactionState.EMPTY else None,
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp,
            previous_producer_id=self.previous_producer_id,
        )

    @classmethod
    def from_value(cls, transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
        parts = {TopicPartition(t, p) for t, ids in (v.transaction_partitions or {}).items()
                 for p in ids}
        return cls(
            transactional_id=transactional_id,
            producer_id=v.producer_id,
            producer_epoch=v.producer_epoch,
            previous_producer_id=v.previous_producer_id,
            txn_timeout_ms=v.transaction_timeout_ms,
            state=TransactionState(v.transaction_status),
            partitions=parts,
            txn_start_timestamp=v.transaction_start_timestamp_ms,
            txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        )

    def copy(self) -> TransactionMetadata:
        return TransactionMetadata(
            self.transactional_id, self.producer_id, self.producer_epoch,
            self.last_producer_epoch, self.previous_producer_id, self.txn_timeout_ms,
            self.state, set(self.partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )
