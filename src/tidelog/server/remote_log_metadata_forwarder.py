"""``__remote_log_metadata`` partitions led by another broker, over the inter-broker listener
(Kafka's TopicBasedRemoteLogMetadataManager writes with a producer and reads with a consumer,
whichever broker leads the metadata partition):

- a record is produced to that leader with acks=all, then awaited in this broker's own
  replica until its high watermark covers it, so the write is replayed here before the copy
  goes on; a broker with no replica of the metadata partition reads it back instead;
- a broker with no replica of a metadata partition reads it from its leader as a consumer
  does (Fetch, replica id -1: committed records only, below the high watermark).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidelog.client.aio import INTER_BROKER_API_RANGES
from tidelog.client.conn import KafkaClientError
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.log import Log
from tidelog.util.topic_partition import TopicPartition

from .broker_connections import BrokerConnections

if TYPE_CHECKING:
    from tidelog.client.security import ClientSecurity

    from .metadata.cache import MetadataCache

PRODUCE_KEY = 0
FETCH_KEY = 1
FETCH_BY_NAME_VERSION = 12  # topics named, not by id
FETCH_MAX_BYTES = 1 << 20
LIST_OFFSETS_KEY = 2
LATEST, EARLIEST = -1, -2  # ListOffsets' timestamps
API_RANGES = {**INTER_BROKER_API_RANGES, PRODUCE_KEY: (3, 9)}
POLL_S = 0.02


class ForwardError(OSError):
    """The leader refused or could not be reached (the RemoteLogManager retries later)."""


class FetchOffsetOutOfRange(ForwardError):
    """OFFSET_OUT_OF_RANGE: the offset read from is not in the leader's log (its log
    recreated below it, or its retention past it); Kafka's metadata consumer resets to the
    earliest offset (``auto.offset.reset=earliest``)."""


class MetadataForwarder:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener: str,
                 security: ClientSecurity | None, get_log: Callable[[TopicPartition], Log | None],
                 *, timeout_ms: int) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.get_log = get_log
        self.timeout_ms = timeout_ms
        self._conns = BrokerConnections(
            metadata_cache, listener, security, client_id=f"broker-{broker_id}-rlmm",
            timeout_s=timeout_ms / 1000, api_ranges=API_RANGES)

    def leader(self, tp: TopicPartition) -> int:
        reg = self.metadata_cache.image.partition(tp)
        return -1 if reg is None else int(reg.leader)

    async def forward(self, tp: TopicPartition, batch: bytes) -> int:
        """Produce ``batch`` at ``tp``'s leader (acks=all); when this broker has a replica of
        ``tp``, wait until it has the batch below its high watermark. Returns its offset."""
        leader = self.leader(tp)
        if leader < 0:
            raise ForwardError(f"{tp} has no leader")
        offset = await self._produce(leader, tp, batch)
        if self.get_log(tp) is not None:
            await self._replicated_here(tp, offset)
        return offset

    async def fetch(self, tp: TopicPartition, offset: int) -> tuple[bytes, int]:
        """Committed batches of ``tp`` from ``offset`` at its leader, as a consumer reads
        them, and the leader's high watermark."""
        leader = self.leader(tp)
        if leader < 0:
            raise ForwardError(f"{tp} has no leader")
        body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0,
                "max_bytes": FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": tp.topic, "partitions": [{
                    "partition": tp.partition, "current_leader_epoch": -1,
                    "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": FETCH_MAX_BYTES}]}]}
        try:
            conn = await self._conns.get(leader)
            version = min(conn.version(FETCH_KEY), FETCH_BY_NAME_VERSION)
            resp = await conn.call(FETCH_KEY, version, body)
        except (TimeoutError, KafkaClientError, OSError) as exc:
            await self._conns.drop(leader)
            raise ForwardError(f"fetching {tp} from broker {leader}: {exc!r}") from exc
        p = resp.responses[0].partitions[0]
        error = ErrorCode(int(p.error_code))
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise FetchOffsetOutOfRange(f"fetching {tp} at {offset} from broker {leader}: "
                                        f"{error.name}")
        if error != ErrorCode.NONE:
            raise ForwardError(f"fetching {tp} from broker {leader}: {error.name}")
        return (bytes(p.records) if p.records else b""), int(p.high_watermark)

    async def _produce(self, leader: int, tp: TopicPartition, batch: bytes) -> int:
        body = {"transactional_id": None, "acks": -1, "timeout": self.timeout_ms,
                "topic_data": [{"name": tp.topic, "partition_data": [
                    {"index": tp.partition, "records": batch}]}]}
        try:
            conn = await self._conns.get(leader)
            resp = await conn.call(PRODUCE_KEY, conn.version(PRODUCE_KEY), body)
        except (TimeoutError, KafkaClientError, OSError) as exc:
            await self._conns.drop(leader)
            raise ForwardError(f"producing to {tp} at broker {leader}: {exc!r}") from exc
        p = resp.responses[0].partition_responses[0]
        error = ErrorCode(int(p.error_code))
        if error != ErrorCode.NONE:
            raise ForwardError(f"producing to {tp} at broker {leader}: {error.name}")
        return int(p.base_offset)

    def hosted(self, tp: TopicPartition) -> bool:
        """Whether this broker has a replica of ``tp`` to replay."""
        return self.get_log(tp) is not None

    async def caught_up(self, tp: TopicPartition) -> None:
        """A read barrier: wait until this broker's replica of ``tp`` has everything its
        leader has committed now (the leader's high watermark, asked with ListOffsets), so a
        new leader of a user partition sees every copy its predecessor finished."""
        leader = self.leader(tp)
        if leader < 0 or leader == self.broker_id:
            return
        end = await self._list_offset(leader, tp, LATEST)
        if end > 0:
            await self._replicated_here(tp, end - 1)

    async def earliest_offset(self, tp: TopicPartition) -> int:
        """``tp``'s log start offset at its leader (ListOffsets EARLIEST, as a consumer
        resetting to the earliest offset asks it)."""
        leader = self.leader(tp)
        if leader < 0:
            raise ForwardError(f"{tp} has no leader")
        return await self._list_offset(leader, tp, EARLIEST)

    async def _list_offset(self, leader: int, tp: TopicPartition, timestamp: int) -> int:
        """ListOffsets of ``tp`` at broker ``leader`` for ``timestamp`` (LATEST: its high
        watermark, committed records only; EARLIEST: its log start)."""
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": tp.topic,
                "partitions": [{"partition_index": tp.partition, "current_leader_epoch": -1,
                                "timestamp": timestamp}]}]}
        try:
            conn = await self._conns.get(leader)
            resp = await conn.call(LIST_OFFSETS_KEY, conn.version(LIST_OFFSETS_KEY), body)
        except (TimeoutError, KafkaClientError, OSError) as exc:
            await self._conns.drop(leader)
            raise ForwardError(f"asking {tp}'s offsets of broker {leader}: {exc!r}") from exc
        p = resp.topics[0].partitions[0]
        if int(p.error_code) != 0:
            raise ForwardError(f"{tp} offsets at broker {leader}: "
                               f"{ErrorCode(int(p.error_code)).name}")
        return int(p.offset)

    async def _replicated_here(self, tp: TopicPartition, offset: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while loop.time() < deadline:
            lg = self.get_log(tp)
            if lg is not None and lg.high_watermark > offset:
                return
            await asyncio.sleep(POLL_S)
        raise ForwardError(f"{tp} offset {offset} not replicated to broker {self.broker_id} "
                           f"in {self.timeout_ms} ms")

    async def close(self) -> None:
        await self._conns.close()
