"""The produce path's transaction verification (KIP-890 part 1, Kafka's
``transaction.partition.verification.enable``): a transactional batch is appended only when
its partition was added to the producer's ongoing transaction. Kafka's ReplicaManager asks
the coordinator with AddPartitionsToTxn v4 ``verify_only``; on one node the coordinator is
in-process, so the question is a dictionary lookup. In a cluster a producer whose
coordinator is another broker is not verified (the remote AddPartitionsToTxn is not asked). Without it a hanging transaction could
start on a partition the coordinator will never send a marker to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch
from tidelog.records.batch import (
    ATTRIBUTES_OFFSET,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_MASK,
)
from tidelog.util.topic_partition import TopicPartition

from .config import TxnConfig

if TYPE_CHECKING:
    from .wiring import TxnHost


def verify_transactional_produce(broker: TxnHost, tp: TopicPartition,
                                 records: bytes | bytearray | memoryview) -> ErrorCode | None:
    """None to go on; else the error for the partition (INVALID_PRODUCER_EPOCH for a fenced
    epoch, INVALID_TXN_STATE for a partition outside the transaction)."""
    # the hot path: two header fields for the (usual) non-transactional batch
    # (the transactional bit is in the attributes' low byte, byte 22 of the batch)
    if (len(records) < RECORD_BATCH_OVERHEAD or records[MAGIC_OFFSET] != 2
            or not records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK):
        return None  # the validator reports a malformed batch
    batch = RecordBatch(memoryview(records)[:RECORD_BATCH_OVERHEAD])
    if batch.magic != 2 or not batch.is_transactional or batch.is_control:
        return None
    coord = broker.txn_coordinator
    if coord is None:
        if not _verification_enabled(broker):
            return None
        return ErrorCode.INVALID_TXN_STATE  # no transaction was ever started here
    if not coord.config.transaction_partition_verification_enable:
        return None
    pid, epoch = batch.producer_id, batch.producer_epoch
    meta = coord.state.by_producer(pid)
    if meta is None and coord.state.partitions.loading:
        # the producer's id may sit in a partition still loading; Kafka answers the
        # coordinator's load errors to a producer as NOT_ENOUGH_REPLICAS so that every
        # client version retries (AddPartitionsToTxnManager)
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if meta is None and not broker.replica_manager.one_broker:
        return None  # its coordinator is another broker: not asked (no remote verification)
    if meta is not None and epoch < meta.producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if coord.in_transaction(pid, epoch, tp):
        return None
    return ErrorCode.INVALID_TXN_STATE


def _verification_enabled(broker: TxnHost) -> bool:
    return TxnConfig.from_broker_config(broker.config).transaction_partition_verification_enable
