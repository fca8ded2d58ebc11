"""A ``__remote_log_metadata`` record for a partition led by another broker: produced to that
leader with acks=all over the inter-broker listener (Kafka's TopicBasedRemoteLogMetadataManager
writes through a producer, whichever broker leads the metadata partition), then awaited in
this broker's own replica until its high watermark covers it, so the write is replayed here
before the copy goes on.
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
LIST_OFFSETS_KEY = 2
API_RANGES = {**INTER_BROKER_API_RANGES, PRODUCE_KEY: (3, 9)}
POLL_S = 0.02


class ForwardError(OSError):
    """The leader refused or could not be reached (the RemoteLogManager retries later)."""


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

    async def forward(self, tp: TopicPartition, batch: bytes) -> None:
        """Produce ``batch`` at ``tp``'s leader (acks=all), then wait until this broker's
        replica of ``tp`` has it below its high watermark."""
        leader = self.leader(tp)
        if leader < 0:
            raise ForwardError(f"{tp} has no leader")
        if self.get_log(tp) is None:
            raise ForwardError(f"{tp} has no replica on broker {self.broker_id}: its records "
                               "could not be replayed here")
        offset = await self._produce(leader, tp, batch)
        await self._replicated_here(tp, offset)

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

    async def caught_up(self, tp: TopicPartition) -> None:
        """A read barrier: wait until this broker's replica of ``tp`` has everything its
        leader has committed now (the leader's high watermark, asked with ListOffsets), so a
        new leader of a user partition sees every copy its predecessor finished."""
        leader = self.leader(tp)
        if leader < 0 or leader == self.broker_id:
            return
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": tp.topic,
                "partitions": [{"partition_index": tp.partition, "current_leader_epoch": -1,
                                "timestamp": -1}]}]}
        try:
            conn = await self._conns.get(leader)
            resp = await conn.call(LIST_OFFSETS_KEY, conn.version(LIST_OFFSETS_KEY), body)
        except (TimeoutError, KafkaClientError, OSError) as exc:
            await self._conns.drop(leader)
            raise ForwardError(f"asking {tp}'s end of broker {leader}: {exc!r}") from exc
        p = resp.topics[0].partitions[0]
        if int(p.error_code) != 0:
            raise ForwardError(f"{tp} end at broker {leader}: "
                               f"{ErrorCode(int(p.error_code)).name}")
        if int(p.offset) > 0:
            await self._replicated_here(tp, int(p.offset) - 1)

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
