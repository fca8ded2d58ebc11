"""A buffering, optionally idempotent producer on top of KafkaClient.

Records are accumulated into one RecordBatch per partition (up to ``batch_bytes``), and
``flush()`` sends them with one Produce per leader. With idempotence the producer asks for a
producer id (InitProducerId) and numbers each partition's batches with sequence numbers, so a
batch resent after a lost response is de-duplicated by the broker instead of written twice.
Partitioning follows Kafka's default partitioner: murmur2(key) for keyed records, a sticky
partition (changed after each batch) for records without a key.

No product code produces through it any more (the console tools and the Spark writer use
librdkafka); tests keep it as a protocol-level producer they control byte for byte.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from tidelog.records import CompressionType, assemble_batch, compress
from tidelog.records.varint import encode_varint

from .kafka_client import KafkaClient, KafkaClientError, TopicPartition

Header = tuple[str, bytes | None]
DEFAULT_BATCH_BYTES = 512 * 1024  # below the broker's default max.message.bytes (1 MiB)
_RECORD_OVERHEAD = 24


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2), as a signed 32-bit int."""
    length = len(data)
    seed, m, r = 0x9747B28C, 0x5BD1E995, 24
    h = (seed ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4 : i * 4 + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length & 3
    tail = n4 * 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % numPartitions."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# zig-zag varint encodings of -1..16383 (lengths, small deltas): a table lookup instead of a
# per-byte loop for nearly every field of a record
_VARINT_LIMIT = 16384
_VARINTS = [encode_varint(v) for v in range(-1, _VARINT_LIMIT)]


def _varint(v: int) -> bytes:
    return _VARINTS[v + 1] if -1 <= v < _VARINT_LIMIT else encode_varint(v)


@dataclass(slots=True)
class _Pending:
    """The records of the batch being filled for one partition, already encoded."""

    body: bytearray = field(default_factory=bytearray)
    count: int = 0
    first_ts: int = 0
    max_ts: int = -1
    ready: list[bytes] = field(default_factory=list)

    def add(self, ts: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]) -> None:
        if not self.count:
            self.first_ts = ts
        if ts > self.max_ts:
            self.max_ts = ts
        parts = [b"\0", _varint(ts - self.first_ts), _varint(self.count)]
        for data in (key, value):
            if data is None:
                parts.append(_VARINTS[0])
            else:
                parts += (_varint(len(data)), data)
        parts.append(_varint(len(headers)))
        for hkey, hval in headers:
            raw = hkey.encode("utf-8")
            parts += (_varint(len(raw)), raw)
            parts += (_VARINTS[0],) if hval is None else (_varint(len(hval)), hval)
        record = b"".join(parts)
        self.body += _varint(len(record))
        self.body += record
        self.count += 1


@dataclass(slots=True)
class ProduceStats:
    records: int = 0
    batches: int = 0
    requests: int = 0


class Producer:
    """``send()`` buffers, ``flush()`` delivers (at-least-once; exactly-once per session with
    idempotence). Not thread-safe: one per thread / Spark task."""

    def __init__(
        self,
        client: KafkaClient,
        *,
        acks: int = -1,
        idempotent: bool = True,
        compression: CompressionType | str = CompressionType.NONE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        max_request_bytes: int = 4 << 20,
    ) -> None:
        if idempotent and acks != -1:
            raise ValueError("idempotence requires acks=all (-1), as in Kafka's producer")
        self.client = client
        self.acks = acks
        self.compression = (
            CompressionType.from_name(compression) if isinstance(compression, str) else compression
        )
        self.batch_bytes = batch_bytes
        self.max_request_bytes = max_request_bytes
        self.producer_id, self.producer_epoch = (
            client.init_producer_id() if idempotent else (-1, -1)
        )
        self._sequences: dict[TopicPartition, int] = {}
        self._pending: dict[TopicPartition, _Pending] = {}
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self.stats = ProduceStats()
        self.offsets: dict[TopicPartition, int] = {}  # last acknowledged offset per partition

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0

    def partition_count(self, topic: str) -> int:
        n = self._partition_counts.get(topic)
        if n is None:
            parts = self.client.partitions_for(topic)
            if not parts:
                raise KafkaClientError(3, f"topic {topic!r} has no partitions")
            n = self._partition_counts[topic] = len(parts)
        return n

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        n = self.partition_count(topic)
        if partition is None:
            if key is not None:
                partition = default_partition(key, n)
            else:
                partition = self._sticky.setdefault(topic, random.randrange(n))
        elif not 0 <= partition < n:
            raise ValueError(
                f"partition {partition} is out of range for topic {topic!r} ({n} partitions)"
            )
        tp = TopicPartition(topic, partition)
        pending = self._pending.get(tp)
        if pending is None:
            pending = self._pending[tp] = _Pending()
        size = _RECORD_OVERHEAD + len(key or b"") + len(value or b"")
        if headers:
            size += sum(len(h) + len(v or b"") + 4 for h, v in headers)
        if pending.count and len(pending.body) + size > self.batch_bytes:
            self._seal(tp, pending)
            if (
                self.stats.batches
                and sum(len(b) for p in self._pending.values() for b in p.ready)
                >= self.max_request_bytes
            ):
                self.flush()
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        pending.add(ts, key, value, headers)
        self.stats.records += 1

    def _seal(self, tp: TopicPartition, pending: _Pending) -> None:
        if pending.count:
            seq = -1
            if self.idempotent:
                seq = self._sequences.get(tp, 0)
                self._sequences[tp] = (seq + pending.count) & 0x7FFFFFFF
            pending.ready.append(
                assemble_batch(
                    base_offset=0,
                    partition_leader_epoch=-1,
                    attributes=int(self.compression),
                    last_offset_delta=pending.count - 1,
                    base_timestamp=pending.first_ts,
                    max_timestamp=pending.max_ts,
                    producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch,
                    base_sequence=seq,
                    records_count=pending.count,
                    payload=compress(self.compression, bytes(pending.body)),
                )
            )
            self.stats.batches += 1
        pending.body = bytearray()
        pending.count = 0
        pending.max_ts = -1
        if tp.topic in self._sticky:  # sticky partitioner: move on after a full batch
            self._sticky[tp.topic] = random.randrange(self.partition_count(tp.topic))

    def flush(self) -> None:
        """Send everything buffered; each partition's batches go in order, one per request."""
        for tp, pending in self._pending.items():
            self._seal(tp, pending)
        while any(p.ready for p in self._pending.values()):
            by_leader: dict[int, dict[TopicPartition, bytes]] = {}
            for tp, pending in self._pending.items():
                if pending.ready:
                    by_leader.setdefault(self.client.leader_for(tp), {})[tp] = pending.ready[0]
            for leader, batches in by_leader.items():
                self._send(leader, batches)
                for tp in batches:
                    self._pending[tp].ready.pop(0)

    def _send(self, leader: int, batches: dict[TopicPartition, bytes]) -> None:
        """Resending the same bytes (same sequence numbers) after an error is safe: the broker
        answers a duplicate with the original offsets."""

        def go() -> dict[TopicPartition, tuple[int, int]] | None:
            return self.client.produce(
                self.client.leader_for(next(iter(batches))), batches, acks=self.acks
            )

        result = self.client._retrying("Produce", go)
        self.stats.requests += 1
        for tp, (base, _lat) in (result or {}).items():
            self.offsets[tp] = base

    def close(self) -> None:
        self.flush()
