"""``OffsetsStore`` over the broker's logs: partition N is ``__consumer_offsets-N``.

The topic is created on the first write (as Kafka creates it on the first FindCoordinator),
compacted, with Kafka's internal-topic settings. Reads at load time go through ``Log.read``
page by page, so loading a large partition never holds it all in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tidelog.records import RecordBatch, iter_batches
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.partition_writer import PartitionWriter
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms


def offsets_topic_configs(config: GroupConfig) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
    }


class LogOffsetsStore:
    """``__consumer_offsets`` by default; the share coordinator's ``__share_group_state``
    uses the same port over another compacted topic."""

    def __init__(self, replica_manager: ReplicaManager, config: GroupConfig,
                 topic: str = OFFSETS_TOPIC, partitions: int | None = None) -> None:
        self.rm = replica_manager
        self.config = config
        self.topic = topic
        self.partitions = config.offsets_topic_num_partitions if partitions is None \
            else partitions
        # in a cluster every write is replicated (acks=all) and handlers await it
        self.replicated: PartitionWriter | None = None
        if not getattr(replica_manager, "one_broker", True):
            self.replicated = PartitionWriter(replica_manager, topic, COMMIT_TIMEOUT_MS)

    def _ensure_topic(self) -> None:
        if self.rm.topic(self.topic) is None:
            log.info("creating %s with %d partitions", self.topic, self.partitions)
            self.rm.create_topic(self.topic, self.partitions, offsets_topic_configs(self.config))

    def append(self, partition: int, batch: bytes) -> int:
        if self.replicated is not None:
            return self.replicated.append(partition, batch)
        self._ensure_topic()
        tp = TopicPartition(self.topic, partition)
        try:
            lg = self.rm.get_log(tp)
        except Exception as exc:  # its log dir is offline: the coordinator is unavailable
            raise OSError(str(exc)) from exc
        if lg is None:
            raise OSError(f"{self.topic}-{partition} is not hosted here")
        try:
            info = lg.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        except Exception as exc:  # storage errors surface as an unavailable coordinator
            self.rm.maybe_handle_io_error(tp, exc)  # a disk error takes its dir offline
            raise OSError(str(exc)) from exc
        lg.maybe_increment_high_watermark(lg.log_end_offset)
        return int(info.first_offset)

    def read_batches(self, partition: int) -> Iterator[RecordBatch]:
        if self.rm.topic(self.topic) is None:
            return
        lg = self.rm.get_log(TopicPartition(self.topic, partition))
        if lg is None:
            return
        offset = lg.log_start_offset
        end = lg.log_end_offset
        while offset < end:
            # Kafka loads up to the log end: after a restart the high watermark may lag.
            info = lg.read(offset, self.config.offsets_load_buffer_size, FetchIsolation.LOG_END, True)
            data = info.records.read() if info.records is not None else b""
            if not data:
                return
            progressed = False
            for batch in iter_batches(data):
                if batch.next_offset <= offset:
                    continue
                progressed = True
                offset = batch.next_offset
                yield batch
            if not progressed:
                return
