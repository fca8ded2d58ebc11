"""Transaction markers to partitions led by other brokers (Kafka's
TransactionMarkerChannelManager, one WriteTxnMarkers request per marker and partition).

``TxnMarkerSender.send`` returns a task that completes once the partition's leader has
appended the marker and its ISR has it (the leader answers WriteTxnMarkers then), retrying
NOT_LEADER_OR_FOLLOWER, leaderless partitions and lost connections with a backoff until
``retry_window_ms`` passes; it then raises and the transaction stays prepared (the
coordinator's timer completes it again later, as Kafka retries until the markers land).
A partition deleted meanwhile (UNKNOWN_TOPIC_OR_PARTITION) needs no marker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from tidelog.client.aio import INTER_BROKER_API_RANGES
from tidelog.client.conn import KafkaClientError
from tidelog.protocol.errors import ErrorCode
from tidelog.records import ControlRecordType, RecordBatchBuilder
from tidelog.server.broker_connections import BrokerConnections
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.client.security import ClientSecurity
    from tidelog.server.metadata.cache import MetadataCache

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_KEY = 27
MARKER_API_RANGES = {**INTER_BROKER_API_RANGES, WRITE_TXN_MARKERS_KEY: (1, 1)}


def control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                  now_ms: int) -> bytes:
    """One COMMIT or ABORT control record, as the coordinator writes it."""
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                 is_transactional=True, is_control=True)
    ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    builder.append_control(ctype, now_ms, coordinator_epoch)
    return builder.build()


class MarkerNotWritten(OSError):
    pass


class TxnMarkerSender:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener: str,
                 security: ClientSecurity | None, *, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, retry_window_ms: int = 10_000) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_window_ms = retry_window_ms
        self._conns = BrokerConnections(
            metadata_cache, listener, security, client_id=f"broker-{broker_id}-txn-markers",
            timeout_s=request_timeout_ms / 1000, api_ranges=MARKER_API_RANGES)
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
             coordinator_epoch: int, commit: bool) -> asyncio.Task[None]:
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
        }]}  # fmt: skip
        task = asyncio.get_running_loop().create_task(self._send(tp, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _send(self, tp: TopicPartition, body: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_window_ms / 1000
        error = "no leader"
        while loop.time() < deadline:
            reg = self.metadata_cache.image.partition(tp)
            if reg is None:
                return  # the topic is gone: nothing left to mark (Kafka)
            if reg.leader >= 0 and reg.leader != self.broker_id:
                try:
                    code = await self._call(reg.leader, tp, body)
                    if code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        return
                    error = code.name
                except (TimeoutError, KafkaClientError, OSError) as exc:
                    await self._conns.drop(reg.leader)
                    error = repr(exc)
            elif reg.leader == self.broker_id:
                raise MarkerNotWritten(f"{tp} is led here now: written on the next attempt")
            await asyncio.sleep(self.retry_backoff_ms / 1000)
        raise MarkerNotWritten(f"marker for {tp} not written: {error}")

    async def _call(self, broker: int, tp: TopicPartition, body: dict[str, Any]) -> ErrorCode:
        conn = await self._conns.get(broker)
        version = conn.version(WRITE_TXN_MARKERS_KEY)
        resp = await conn.call(WRITE_TXN_MARKERS_KEY, version, body)
        for marker in resp.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if str(topic.name) == tp.topic and int(p.partition_index) == tp.partition:
                        return ErrorCode(int(p.error_code))
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self._conns.close()
