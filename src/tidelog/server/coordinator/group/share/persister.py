"""The share-partition leader's way to its share coordinator (Kafka's DefaultStatePersister
over PersisterStateManager).

Each call names one share-partition key ("group:topicId:partition"); its share coordinator is
the leader of that key's ``__share_group_state`` partition, as the metadata image shows it
(Kafka's FindCoordinator with key type SHARE). When that is this broker the call goes to the
in-process ``ShareStateCoordinator`` and waits until the ISR has the write; otherwise it is
sent over one ``client.aio`` connection per broker. NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, a leaderless partition and lost
connections are retried with a backoff for ``retry_window_ms``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.client.aio import INTER_BROKER_API_RANGES
from tidelog.client.conn import KafkaClientError
from tidelog.protocol.errors import ErrorCode
from tidelog.server.broker_connections import BrokerConnections
from tidelog.server.coordinator.share.records import (
    SHARE_STATE_TOPIC,
    ShareState,
    StateBatch,
    state_partition_for,
)
from tidelog.server.coordinator.share.state_coordinator import (
    ShareStateCoordinator,
    StateResult,
)
from tidelog.server.coordinator.share.uncommitted import StateKey
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.client.security import ClientSecurity
    from tidelog.server.metadata.cache import MetadataCache

log = logging.getLogger(__name__)

INITIALIZE_KEY, READ_KEY, WRITE_KEY, DELETE_KEY, SUMMARY_KEY = 83, 84, 85, 86, 87
SHARE_STATE_API_RANGES = {**INTER_BROKER_API_RANGES, INITIALIZE_KEY: (0, 0), READ_KEY: (0, 0),
                          WRITE_KEY: (0, 1), DELETE_KEY: (0, 0), SUMMARY_KEY: (0, 1)}
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE})

LocalCall = Callable[[ShareStateCoordinator], StateResult]
Replicated = Callable[[int], Awaitable[ErrorCode]]


@dataclass(frozen=True, slots=True)
class PersisterCall:
    api_key: int
    key: StateKey
    partition_body: dict[str, Any]
    local: LocalCall


class StatePersister:
    def __init__(self, node_id: int, metadata_cache: MetadataCache, listener: str,
                 security: ClientSecurity | None, *, num_partitions: int,
                 local: Callable[[], ShareStateCoordinator | None],
                 replicated: Replicated,
                 ensure_topic: Callable[[], Awaitable[bool]],
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 retry_window_ms: int = 30_000) -> None:
        self.node_id = node_id
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.security = security
        self.num_partitions = num_partitions
        self.local = local
        self.replicated = replicated
        self.ensure_topic = ensure_topic
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_window_ms = retry_window_ms
        self._conns = BrokerConnections(
            metadata_cache, listener, security, client_id=f"broker-{node_id}-share-persister",
            timeout_s=request_timeout_ms / 1000, api_ranges=SHARE_STATE_API_RANGES)

    # ------------------------------------------------------------------ the calls

    async def read(self, key: StateKey, leader_epoch: int) -> StateResult:
        return await self._call(PersisterCall(
            READ_KEY, key, {"partition": key[2], "leader_epoch": leader_epoch},
            lambda c: c.read(key, leader_epoch)))

    async def summary(self, key: StateKey, leader_epoch: int = -1) -> StateResult:
        return await self._call(PersisterCall(
            SUMMARY_KEY, key, {"partition": key[2], "leader_epoch": leader_epoch},
            lambda c: c.summary(key)))

    async def write(self, key: StateKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...]) -> ErrorCode:
        body = {"partition": key[2], "state_epoch": state_epoch, "leader_epoch": leader_epoch,
                "start_offset": start_offset,
                "state_batches": [{"first_offset": a, "last_offset": b, "delivery_state": s,
                                   "delivery_count": n} for a, b, s, n in batches]}
        return (await self._call(PersisterCall(
            WRITE_KEY, key, body,
            lambda c: StateResult(c.write(key, state_epoch, leader_epoch, start_offset,
                                          batches))))).error

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int
                         ) -> ErrorCode:
        body = {"partition": key[2], "state_epoch": state_epoch, "start_offset": start_offset}
        return (await self._call(PersisterCall(
            INITIALIZE_KEY, key, body,
            lambda c: StateResult(c.initialize(key, state_epoch, start_offset))))).error

    async def delete(self, key: StateKey) -> ErrorCode:
        return (await self._call(PersisterCall(
            DELETE_KEY, key, {"partition": key[2]},
            lambda c: StateResult(c.delete(key))))).error

    # ------------------------------------------------------------------ routing

    async def _call(self, call: PersisterCall) -> StateResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_window_ms / 1000
        result = StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        p = state_partition_for(*call.key, self.num_partitions)
        tp = TopicPartition(SHARE_STATE_TOPIC, p)
        while True:
            result = await self._attempt(call, tp)
            if result.error not in RETRIABLE or loop.time() >= deadline:
                return result
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def _attempt(self, call: PersisterCall, tp: TopicPartition) -> StateResult:
        reg = self.metadata_cache.image.partition(tp)
        if reg is None:  # the topic is made on first use (Kafka's FindCoordinator does)
            if not await self.ensure_topic():
                return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            reg = self.metadata_cache.image.partition(tp)
        if reg is None or reg.leader < 0:
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if reg.leader == self.node_id:
            coord = self.local()
            if coord is None:
                return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            result = call.local(coord)
            if result.error == ErrorCode.NONE:
                err = await self.replicated(tp.partition)
                if err != ErrorCode.NONE:
                    return StateResult(err)
            return result
        try:
            return await self._remote(reg.leader, call)
        except (TimeoutError, KafkaClientError, OSError) as exc:
            log.debug("share coordinator on broker %d: %r", reg.leader, exc)
            await self._conns.drop(reg.leader)
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _remote(self, broker: int, call: PersisterCall) -> StateResult:
        conn = await self._conns.get(broker)
        version = conn.version(call.api_key)
        body = {"group_id": call.key[0],
                "topics": [{"topic_id": call.key[1], "partitions": [call.partition_body]}]}
        resp = await conn.call(call.api_key, version, body)
        for topic in resp.results:
            for p in topic.partitions:
                if topic.topic_id == call.key[1] and int(p.partition) == call.key[2]:
                    return _result(call.api_key, p)
        return StateResult(ErrorCode.UNKNOWN_SERVER_ERROR)

    async def close(self) -> None:
        await self._conns.close()


def _result(api_key: int, p: Any) -> StateResult:
    err = ErrorCode(int(p.error_code))
    if err != ErrorCode.NONE or api_key not in (READ_KEY, SUMMARY_KEY):
        return StateResult(err, message=p.error_message)
    batches = tuple((int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                     int(b.delivery_count)) for b in getattr(p, "state_batches", ()))
    leader_epoch = int(getattr(p, "leader_epoch", -1))
    return StateResult(err, ShareState(0, int(p.state_epoch), leader_epoch,
                                       int(p.start_offset), batches))


class LocalPersister:
    """The persister of a broker that is the share coordinator of every key (tests, tools):
    calls go straight to ``coord``."""

    def __init__(self, coord: ShareStateCoordinator) -> None:
        self.coord = coord

    async def read(self, key: StateKey, leader_epoch: int) -> StateResult:
        return self.coord.read(key, leader_epoch)

    async def summary(self, key: StateKey, leader_epoch: int = -1) -> StateResult:
        return self.coord.summary(key)

    async def write(self, key: StateKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: tuple[StateBatch, ...]) -> ErrorCode:
        return self.coord.write(key, state_epoch, leader_epoch, start_offset, batches)

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int
                         ) -> ErrorCode:
        return self.coord.initialize(key, state_epoch, start_offset)

    async def delete(self, key: StateKey) -> ErrorCode:
        return self.coord.delete(key)

    async def close(self) -> None:
        return None
