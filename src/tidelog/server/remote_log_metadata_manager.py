"""Remote segment metadata in ``__remote_log_metadata`` (Kafka's
TopicBasedRemoteLogMetadataManager, its RemoteLogMetadataTopicPartitioner and ConsumerTask).

Every event of a remote segment (COPY_SEGMENT_STARTED/FINISHED, DELETE_SEGMENT_STARTED/
FINISHED, partition deletes) is one record of the metadata partition Kafka's partitioner
picks for the user partition, its value in Kafka's serde and no key, written with acks=all
through the broker's own replicated append path (the coordinators' ``PartitionWriter``)
when this broker leads the metadata partition, else produced to its leader
(``remote_log_metadata_forwarder``).
The write returns once the record is replicated AND replayed here, as Kafka's
``waitTillConsumptionCatchesUp``.

Each broker replays the metadata partitions it holds from its own replica, up to the high
watermark (only committed records), into one ``RemoteLogMetadataCache`` per user partition,
so a new leader sees exactly the segments the old one committed: a COPY_SEGMENT_STARTED
without FINISHED is an upload that was cut (the RemoteLogManager deletes its objects). A
metadata partition with no replica here is read from its leader as Kafka's consumer reads it
(``refresh``, ``sync``, and after each write of this broker), so a broker tiers, reads and
expires whichever brokers host ``__remote_log_metadata``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from tidelog.client.producer import murmur2
from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC
from tidelog.records import RecordBatch
from tidelog.records.batch import iter_batches
from tidelog.records.builder import build_batch
from tidelog.storage.log import Log
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.storage.remote.metadata_serde import deserialize, serialize
from tidelog.util.topic_partition import TopicPartition

from .coordinator.partition_writer import PartitionWriter
from .remote_log_metadata_forwarder import FetchOffsetOutOfRange

if TYPE_CHECKING:
    from tidelog.protocol.errors import ErrorCode

    from .remote_log_metadata_forwarder import MetadataForwarder
    from .remote_log_metadata_topic import MetadataTopicInitializer

log = logging.getLogger(__name__)

READ_BUFFER_BYTES = 1 << 20
FETCHES_PER_CATCH_UP = 100
NO_PROGRESS_WAIT_S = 0.05
_INT32 = 1 << 32


def _java_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - _INT32 if v & 0x80000000 else v


def _java_long_hash(v: int) -> int:
    """Java's ``Long.hashCode``: (int)(v ^ (v >>> 32)) of the two's complement value."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return _java_int(u ^ (u >> 32))


def metadata_partition(tip: TopicIdPartition, num_partitions: int) -> int:
    """Kafka's ``RemoteLogMetadataTopicPartitioner.metadataPartition``:
    ``toPositive(murmur2(int bytes of Objects.hash(lsb, msb, partition))) % n``."""
    bits = tip.topic_id.int
    msb = bits >> 64
    lsb = bits & 0xFFFFFFFFFFFFFFFF
    h = 1
    for element in (_java_long_hash(lsb), _java_long_hash(msb), _java_int(tip.partition)):
        h = _java_int(31 * h + element)
    return (murmur2((h & 0xFFFFFFFF).to_bytes(4, "big")) & 0x7FFFFFFF) % num_partitions


class RemoteLogMetadataError(OSError):
    """A metadata record could not be written (the leader moved, too few replicas, the
    topic is not there yet): the RemoteLogManager retries later."""


LogLookup = Callable[[TopicPartition], "Log | None"]
EnsureTopic = Callable[[], Awaitable[bool]]


class TopicBasedRemoteLogMetadataManager:
    """Writes remote segment events to ``__remote_log_metadata`` and keeps their replay."""

    def __init__(self, *, appender: PartitionWriter, get_log: LogLookup,
                 num_partitions: int, ensure_topic: EnsureTopic,
                 forwarder: MetadataForwarder | None = None,
                 initializer: MetadataTopicInitializer | None = None) -> None:
        self.appender = appender
        self.initializer = initializer  # the topic's creation at start-up
        self.forwarder = forwarder  # in a cluster: writes of partitions led elsewhere
        self.get_log = get_log
        self.num_partitions = num_partitions
        self.ensure_topic = ensure_topic
        self.caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self.consumed: dict[int, int] = {}  # metadata partition -> next offset to replay
        self._consuming: dict[int, asyncio.Lock] = {}
        self.replay_errors = 0

    def ready(self) -> bool:
        """Kafka's isInitialized: the metadata topic exists (always, without an initializer)."""
        return self.initializer is None or self.initializer.ready

    # -- writes ---------------------------------------------------------------------------------
    async def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Kafka's ``addRemoteLogSegmentMetadata``: a COPY_SEGMENT_STARTED event."""
        await self._publish(metadata.topic_id_partition, metadata)

    async def update_remote_log_segment_metadata(
            self, update: RemoteLogSegmentMetadataUpdate) -> None:
        await self._publish(update.topic_id_partition, update)

    async def put_remote_partition_delete_metadata(
            self, metadata: RemotePartitionDeleteMetadata) -> None:
        await self._publish(metadata.topic_id_partition, metadata)

    async def _publish(self, tip: TopicIdPartition, record: RemoteLogMetadata) -> None:
        if not await self.ensure_topic():
            raise RemoteLogMetadataError(f"{REMOTE_LOG_METADATA_TOPIC} is not ready yet")
        partition = metadata_partition(tip, self.num_partitions)
        batch = build_batch([(0, None, serialize(record))])
        tp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition)
        f = self.forwarder
        if f is not None and f.leader(tp) != f.broker_id:
            try:
                offset = await f.forward(tp, batch)
                if not f.hosted(tp):  # read back from the leader, as Kafka's consumer
                    await self._consume_from_leader(partition, offset + 1)
            except OSError as exc:
                raise RemoteLogMetadataError(f"writing {tp} for {tip}: {exc}") from exc
            self.catch_up(partition)
            return
        try:
            self.appender.append(partition, batch)
        except OSError as exc:
            raise RemoteLogMetadataError(
                f"writing {REMOTE_LOG_METADATA_TOPIC}-{partition} for {tip}: {exc}") from exc
        error: ErrorCode = await self.appender.replicated(partition)
        if error.value != 0:
            raise RemoteLogMetadataError(
                f"{REMOTE_LOG_METADATA_TOPIC}-{partition} for {tip}: {error.name}")
        self.catch_up(partition)

    # -- replay ---------------------------------------------------------------------------------
    def partition_for(self, tip: TopicIdPartition) -> int:
        return metadata_partition(tip, self.num_partitions)

    def catch_up(self, partition: int) -> int:
        """Replay this broker's replica of metadata ``partition`` up to its high watermark;
        returns the records applied. Its records are few (a handful per segment)."""
        lg = self.get_log(TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition))
        if lg is None:
            return 0
        offset = max(self.consumed.get(partition, 0), lg.log_start_offset)
        applied = 0
        for batch in _committed_batches(lg, offset):
            for rec in batch:
                if rec.offset >= offset and rec.value is not None:
                    applied += self._apply(rec.value, partition, rec.offset)
            offset = batch.next_offset
            self.consumed[partition] = offset
        return applied

    async def sync(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        """``tip``'s cache with everything its metadata partition's leader has committed
        (a read barrier when another broker leads it), as Kafka's new leader waits for its
        metadata consumer to catch up before copying."""
        f = self.forwarder
        if f is not None:
            partition = self.partition_for(tip)
            tp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition)
            try:
                if f.hosted(tp):
                    await f.caught_up(tp)
                else:
                    await self._consume_from_leader(partition, None)
            except OSError as exc:
                raise RemoteLogMetadataError(str(exc)) from exc
        return self.catch_up_for(tip)

    async def refresh(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        """``tip``'s cache with what this broker's replica of its metadata partition has,
        or, with no replica here, what the partition's leader has committed (one Fetch)."""
        f = self.forwarder
        partition = self.partition_for(tip)
        if f is not None and not f.hosted(TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition)):
            try:
                await self._consume_from_leader(partition, None)
            except OSError as exc:
                raise RemoteLogMetadataError(str(exc)) from exc
        return self.catch_up_for(tip)

    async def _consume_from_leader(self, partition: int, until: int | None) -> None:
        """Replay metadata ``partition`` from its leader (Kafka's ConsumerTask) up to
        ``until``, or to the leader's high watermark when None."""
        f = self.forwarder
        assert f is not None
        tp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition)
        lock = self._consuming.setdefault(partition, asyncio.Lock())
        async with lock:  # one reader per partition: no record applied twice
            for _ in range(FETCHES_PER_CATCH_UP):
                offset = self.consumed.get(partition, 0)
                if until is not None and offset >= until:
                    return
                try:
                    data, high_watermark = await f.fetch(tp, offset)
                except FetchOffsetOutOfRange:
                    await self._reset_to_earliest(partition, offset)
                    continue
                if not data and until is not None and high_watermark < until:
                    await asyncio.sleep(NO_PROGRESS_WAIT_S)  # not committed there yet
                for batch in iter_batches(data):
                    for rec in batch:
                        if rec.offset >= offset and rec.value is not None:
                            self._apply(rec.value, partition, rec.offset)
                    offset = max(offset, batch.next_offset)
                self.consumed[partition] = offset
                until = high_watermark if until is None else until
                if offset >= until:
                    return
        raise RemoteLogMetadataError(f"{tp}: not read up to {until} from its leader")

    async def _reset_to_earliest(self, partition: int, position: int) -> None:
        """Kafka's metadata consumer on OFFSET_OUT_OF_RANGE (``auto.offset.reset=earliest``):
        read metadata ``partition`` again from its leader's log start. A position past it
        (the partition's log recreated, or truncated below what was read) means the records
        replayed so far are not the log's any more: the caches of the user partitions it
        holds are rebuilt from the records read from there."""
        f = self.forwarder
        assert f is not None
        tp = TopicPartition(REMOTE_LOG_METADATA_TOPIC, partition)
        earliest = await f.earliest_offset(tp)
        log.warning("%s: offset %d is out of range at its leader, reading again from its "
                    "earliest offset %d", tp, position, earliest)
        if earliest < position:
            for tip in [t for t in self.caches if self.partition_for(t) == partition]:
                del self.caches[tip]
        self.consumed[partition] = earliest

    def catch_up_for(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        """The cache of ``tip`` after replaying its metadata partition."""
        self.catch_up(self.partition_for(tip))
        return self.cache(tip)

    def cache(self, tip: TopicIdPartition) -> RemoteLogMetadataCache:
        c = self.caches.get(tip)
        if c is None:
            c = self.caches[tip] = RemoteLogMetadataCache(tip)
        return c

    def _apply(self, value: bytes, partition: int, offset: int) -> int:
        try:
            record = deserialize(value)
            if isinstance(record, RemoteLogSegmentMetadataSnapshot):
                return 0  # only in Kafka's snapshot files, never in the topic
            self.cache(record.topic_id_partition).apply(record)
        except Exception as exc:  # Kafka's ConsumerTask logs and goes on
            self.replay_errors += 1
            log.error("skipping %s-%d offset %d: %s", REMOTE_LOG_METADATA_TOPIC, partition,
                      offset, exc)
            return 0
        return 1

    def forget(self, tip: TopicIdPartition) -> None:
        """Drop a deleted partition's cache (a new topic with its name has another id)."""
        self.caches.pop(tip, None)

    def list_remote_log_segments(self, tip: TopicIdPartition,
                                 leader_epoch: int | None = None
                                 ) -> Iterator[RemoteLogSegmentMetadata]:
        return self.catch_up_for(tip).list_remote_log_segments(leader_epoch)


def _committed_batches(lg: Log, offset: int) -> Iterator[RecordBatch]:
    while offset < lg.high_watermark:
        info = lg.read(offset, READ_BUFFER_BYTES, FetchIsolation.HIGH_WATERMARK, True)
        data = info.records.read() if info.records is not None else b""
        progressed = False
        for batch in iter_batches(data):
            if batch.next_offset > offset:
                progressed = True
                offset = batch.next_offset
                yield batch
        if not progressed:
            return
