"""The leader's ISR changes to the controller: Kafka's DefaultAlterPartitionManager
(core/src/main/scala/kafka/server/AlterPartitionManager.scala), the ``AlterPartitionSender``
a Partition is given.

* ``submit(tp, leader_and_isr)`` queues the proposed state and returns a future of the
  committed state (or of the partition's error code). One change per partition at a time: a
  second submit while one is pending gets OPERATION_NOT_ATTEMPTED at once, as Kafka does;
* one task sends every queued change in one AlterPartition (v2-3, by topic id, with this
  broker's id and epoch) to the active controller, one request in flight at a time;
* a partition error (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, ...)
  completes that partition's future with the error; the committed LeaderAndIsr completes it
  with the new state;
* a request that fails as a whole (no controller known, NOT_CONTROLLER, STALE_BROKER_EPOCH,
  a lost connection, a timeout) is retried after ``retry_backoff_ms`` with the changes
  still queued, and so is a partition the controller's answer left out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError
from tidelog.client.security import ClientSecurity
from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

from ..cluster.partition_state import LeaderAndIsr

log = logging.getLogger(__name__)

ALTER_PARTITION_KEY = 56
# controller id and its inter-broker address, None while no controller is known
ControllerLookup = Callable[[], tuple[int, tuple[str, int]] | None]
AlterResult = LeaderAndIsr | ErrorCode


@dataclass(slots=True)
class _Item:
    tp: TopicPartition
    topic_id: uuid.UUID
    proposed: LeaderAndIsr
    future: asyncio.Future[AlterResult]


class AlterPartitionManager:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller: ControllerLookup,
        topic_ids: Callable[[str], uuid.UUID | None],
        *,
        security: ClientSecurity | None = None,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller = controller
        self._topic_ids = topic_ids
        self._security = security
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._unsent: dict[TopicPartition, _Item] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: AsyncBrokerConnection | None = None
        self._conn_controller: tuple[int, tuple[str, int]] | None = None
        self.requests_sent = 0
        self.attempts = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"alter-partition-{self.broker_id}"
            )

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            # not await: our own cancellation must propagate. Cancelled again until it ends:
            # Python 3.11's wait_for (closing a connection) loses a cancel that arrives as
            # the awaited future completes, and the loop would go on retrying
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1)
        await self._close()
        pending, self._unsent = self._unsent, {}
        for item in pending.values():
            if not item.future.done():
                item.future.set_result(ErrorCode.OPERATION_NOT_ATTEMPTED)

    def submit(
        self, tp: TopicPartition, leader_and_isr: LeaderAndIsr
    ) -> asyncio.Future[AlterResult]:
        future: asyncio.Future[AlterResult] = asyncio.get_running_loop().create_future()
        topic_id = self._topic_ids(tp.topic)
        if tp in self._unsent:
            future.set_result(ErrorCode.OPERATION_NOT_ATTEMPTED)
        elif topic_id is None or topic_id.int == 0:
            future.set_result(ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            self._unsent[tp] = _Item(tp, topic_id, leader_and_isr, future)
            self._wakeup.set()
        return future

    @property
    def pending(self) -> int:
        return len(self._unsent)

    # -- sending ----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = [i for i in self._unsent.values() if not i.future.done()]
            if not batch:
                continue
            self.attempts += 1
            try:
                await self._send(batch)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # whole request failed: keep the items, retry
                log.info("AlterPartition for %d partitions will be retried: %s", len(batch), e)
                await self._close()
            if any(self._unsent.get(i.tp) is i for i in batch):  # unanswered: back off
                await asyncio.sleep(self.retry_backoff_ms / 1000)
            if self._unsent:
                self._wakeup.set()

    async def _connection(self) -> AsyncBrokerConnection:
        controller = self._controller()
        if controller is None:
            raise KafkaClientError(ErrorCode.NOT_CONTROLLER, "AlterPartition: no controller known")
        if self._conn is None or self._conn.closed or controller != self._conn_controller:
            await self._close()
            host, port = controller[1]
            self._conn = await AsyncBrokerConnection.connect(
                host,
                port,
                client_id=f"broker-{self.broker_id}-alter-partition",
                timeout_s=self.request_timeout_ms / 1000,
                security=self._security,
            )
            self._conn_controller = controller
        return self._conn

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self._conn_controller = None
        if conn is not None:
            await conn.close()

    async def _send(self, batch: list[_Item]) -> None:
        """One AlterPartition: the partitions the controller answered are completed and
        dequeued; the others stay queued for a retry."""
        conn = await self._connection()
        version = conn.version(ALTER_PARTITION_KEY)
        self.requests_sent += 1
        resp = await conn.call(ALTER_PARTITION_KEY, version, self._body(version, batch))
        error = int(resp.error_code)
        if error != ErrorCode.NONE:
            log.info("AlterPartition answered %s", ErrorCode(error).name)
            if error == ErrorCode.NOT_CONTROLLER:
                await self._close()
            return
        by_key = {(i.topic_id, i.tp.partition): i for i in batch}
        for topic in resp.topics:
            for p in topic.partitions:
                item = by_key.get((topic.topic_id, int(p.partition_index)))
                if item is None:
                    continue
                self._complete(item, _result(p))

    def _complete(self, item: _Item, result: AlterResult) -> None:
        if self._unsent.get(item.tp) is item:
            del self._unsent[item.tp]
        if not item.future.done():
            item.future.set_result(result)

    def _body(self, version: int, batch: list[_Item]) -> dict[str, Any]:
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for item in batch:
            s = item.proposed
            part: dict[str, Any] = {
                "partition_index": item.tp.partition,
                "leader_epoch": s.leader_epoch,
                "leader_recovery_state": s.leader_recovery_state,
                "partition_epoch": s.partition_epoch,
            }
            if version >= 3:  # KIP-903: the ISR with broker epochs (-1: not checked)
                part["new_isr_with_epochs"] = [{"broker_id": b, "broker_epoch": -1} for b in s.isr]
            else:
                part["new_isr"] = list(s.isr)
            topics.setdefault(item.topic_id, []).append(part)
        return {
            "broker_id": self.broker_id,
            "broker_epoch": self._broker_epoch(),
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
        }


def _result(p: Any) -> AlterResult:
    error = int(p.error_code)
    if error != ErrorCode.NONE:
        try:
            return ErrorCode(error)
        except ValueError:
            return ErrorCode.UNKNOWN_SERVER_ERROR
    return LeaderAndIsr(
        int(p.leader_id),
        int(p.leader_epoch),
        tuple(int(b) for b in p.isr),
        int(p.partition_epoch),
        int(p.leader_recovery_state),
    )
