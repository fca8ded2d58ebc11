"""Transactional ids and their persistence in ``__transaction_state`` (Kafka's
TransactionStateManager).

Every transition is appended to the id's partition before the cache changes and before the
client hears of it, so the cache never says more than the log. Loading replays a partition
(last record per key wins, a null value removes the id: what compaction keeps)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatch, RecordBatchBuilder, iter_batches
from tidelog.server.coordinator.partition_writer import CoordinatorWriteError, PartitionWriter
from tidelog.server.coordinator.runtime import CoordinatorPartitions
from tidelog.server.errors import ApiError
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from .config import TxnConfig
from .metadata import TransactionMetadata, TransactionState
from .records import (
    TRANSACTION_STATE_TOPIC,
    TxnSchemaError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)

WRITE_TIMEOUT_MS = 30000  # Kafka waits request.timeout.ms for the ISR


def transaction_topic_configs(config: TxnConfig) -> dict[str, str]:
    """Kafka's TransactionStateManager.transactionTopicConfigs."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "segment.bytes": str(config.transaction_state_log_segment_bytes),
        "unclean.leader.election.enable": "false",
        "min.insync.replicas": str(config.transaction_state_log_min_isr),
    }


class TxnLogStore:
    """Partition N of ``__transaction_state`` over the broker's logs (created on first use)."""

    def __init__(self, replica_manager: ReplicaManager, config: TxnConfig) -> None:
        self.rm = replica_manager
        self.config = config
        # in a cluster every write is replicated (acks=all) and handlers await it
        self.replicated: PartitionWriter | None = None
        if not getattr(replica_manager, "one_broker", True):
            self.replicated = PartitionWriter(replica_manager, TRANSACTION_STATE_TOPIC,
                                                 WRITE_TIMEOUT_MS)

    def ensure_topic(self) -> None:
        if self.rm.topic(TRANSACTION_STATE_TOPIC) is None:
            log.info("creating %s with %d partitions", TRANSACTION_STATE_TOPIC,
                     self.config.transaction_state_log_num_partitions)
            self.rm.create_topic(TRANSACTION_STATE_TOPIC,
                                 self.config.transaction_state_log_num_partitions,
                                 transaction_topic_configs(self.config))

    def _log(self, partition: int, create: bool) -> Log | None:
        if self.rm.topic(TRANSACTION_STATE_TOPIC) is None:
            if not create:
                return None
            self.ensure_topic()
        return self.rm.get_log(TopicPartition(TRANSACTION_STATE_TOPIC, partition))

    def append(self, partition: int, batch: bytes) -> None:
        if self.replicated is not None:
            self.replicated.append(partition, batch)
            return
        from tidelog.storage.validator import AppendOrigin

        lg = self._log(partition, create=True)
        if lg is None:
            raise OSError(f"{TRANSACTION_STATE_TOPIC}-{partition} is not hosted here")
        try:
            lg.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        except Exception as exc:  # surfaces as an unavailable coordinator, as in Kafka
            raise OSError(str(exc)) from exc
        lg.maybe_increment_high_watermark(lg.log_end_offset)

    def read_batches(self, partition: int) -> Iterator[RecordBatch]:
        from tidelog.storage.log_read import FetchIsolation

        lg = self._log(partition, create=False)
        if lg is None:
            return
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            info = lg.read(offset, self.config.transaction_state_log_load_buffer_size,
                           FetchIsolation.LOG_END, True)
            data = info.records.read() if info.records is not None else b""
            progressed = False
            for batch in iter_batches(data):
                if batch.next_offset > offset:
                    progressed = True
                    offset = batch.next_offset
                    yield batch
            if not progressed:
                return


class TransactionStateManager:
    def __init__(self, config: TxnConfig, *, clock: Clock, store: TxnLogStore) -> None:
        self.config = config
        self.clock = clock
        self.store = store
        self.transactions: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, str] = {}  # producer id -> transactional id
        self.partitions = CoordinatorPartitions()  # load states (the coordinator runtime's)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def check_loaded(self, transactional_id: str) -> None:
        """Kafka's getTransactionState errors: loading, or not this node's partition."""
        p = self.partition_for(transactional_id)
        if p in self.partitions.loading:
            raise ApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if p not in self.partitions.owned:
            raise ApiError(ErrorCode.NOT_COORDINATOR)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        self.check_loaded(transactional_id)
        return self.transactions.get(transactional_id)

    def write(self, meta: TransactionMetadata) -> None:
        """Append the new state, then install it; a failed append changes nothing and is
        answered COORDINATOR_NOT_AVAILABLE (Kafka's appendTransactionToLog mapping)."""
        self._append(meta.transactional_id, encode_value(meta.to_value()))
        self._install(meta)

    def durable(self, transactional_id: str) -> Awaitable[ErrorCode] | None:
        """In a cluster: waits until the ISR has the id's state writes so far (NONE, or the
        coordinator's error); None on one broker, where a written state is durable."""
        appender = getattr(self.store, "replicated", None)
        if not isinstance(appender, PartitionWriter):
            return None
        return appender.replicated(self.partition_for(transactional_id))

    def _install(self, meta: TransactionMetadata) -> None:
        self.transactions[meta.transactional_id] = meta
        self._by_producer[meta.producer_id] = meta.transactional_id

    def by_producer(self, producer_id: int) -> TransactionMetadata | None:
        tid = self._by_producer.get(producer_id)
        meta = self.transactions.get(tid) if tid is not None else None
        return meta if meta is not None and meta.producer_id == producer_id else None

    def remove(self, transactional_id: str) -> None:
        """Tombstone an expired id (Kafka writes a null value, then forgets it)."""
        self._append(transactional_id, None)
        self.transactions.pop(transactional_id, None)

    def _append(self, transactional_id: str, value: bytes | None) -> None:
        builder = RecordBatchBuilder()
        builder.append(self.clock.milliseconds(), encode_key(transactional_id), value)
        try:
            self.store.append(self.partition_for(transactional_id), builder.build())
        except OSError as exc:
            log.error("writing %s state failed: %s", transactional_id, exc)
            code = exc.error if isinstance(exc, CoordinatorWriteError) \
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise ApiError(code, str(exc)) from exc

    def forget_partition(self, partition: int) -> int:
        """Drop the ids of ``partition`` from the cache (another broker leads it now)."""
        gone = [t for t in self.transactions if self.partition_for(t) == partition]
        for tid in gone:
            meta = self.transactions.pop(tid)
            if self._by_producer.get(meta.producer_id) == tid:
                del self._by_producer[meta.producer_id]
        return len(gone)

    # -- loading -------------------------------------------------------------------------------
    @staticmethod
    def replay_batch(latest: dict[bytes, bytes | None], batch: RecordBatch) -> None:
        if batch.is_control:
            return
        for rec in batch.iter_records():
            if rec.key is not None:
                latest[rec.key] = rec.value

    def complete_load(self, partition: int,
                      latest: dict[bytes, bytes | None]) -> list[TransactionMetadata]:
        """Install a replayed partition; returns its ids whose markers must be (re)sent."""
        for key, value in latest.items():
            try:
                tid = decode_key(key)
                if value is None:
                    self.transactions.pop(tid, None)
                    continue
                meta = TransactionMetadata.from_value(tid, decode_value(value))
            except (TxnSchemaError, ValueError) as exc:
                log.warning("skipping unreadable record of %s-%d: %s",
                            TRANSACTION_STATE_TOPIC, partition, exc)
                continue
            self._install(meta)
        self.partitions.activate(partition)
        return [m for m in self.transactions.values()
                if self.partition_for(m.transactional_id) == partition
                and m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def load_partition(self, partition: int) -> list[TransactionMetadata]:
        self.partitions.mark_loading((partition,))
        latest: dict[bytes, bytes | None] = {}
        for batch in self.store.read_batches(partition):
            self.replay_batch(latest, batch)
        return self.complete_load(partition, latest)
