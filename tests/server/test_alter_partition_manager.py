"""AlterPartitionManager against a real broker that is not the controller (a one-broker
broker answers AlterPartition NOT_CONTROLLER): the change stays queued and is retried, one
change per partition at a time, a topic without an id is refused, shutdown answers what is
still queued. The committed path runs in the cluster tests (tests/cluster)."""

from __future__ import annotations

import asyncio
import time
import uuid

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster.partition_state import LeaderAndIsr
from tidelog.server.replication.alter_partition import AlterPartitionManager
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")


def test_not_controller_is_retried_one_change_per_partition(tidelog_broker: EmbeddedBroker) -> None:
    async def main() -> None:
        manager = AlterPartitionManager(
            1,
            lambda: 5,
            lambda: (0, ("127.0.0.1", tidelog_broker.port)),
            lambda topic: TOPIC_ID if topic == "t" else None,
            retry_backoff_ms=20,
        )
        manager.start()
        first = manager.submit(TP, LeaderAndIsr(1, 3, (1, 2), 7))
        second = manager.submit(TP, LeaderAndIsr(1, 3, (1,), 7))
        assert second.done() and second.result() == ErrorCode.OPERATION_NOT_ATTEMPTED
        unknown = manager.submit(TopicPartition("nameless", 0), LeaderAndIsr(1, 1, (1,), 0))
        assert unknown.done() and unknown.result() == ErrorCode.UNKNOWN_TOPIC_ID
        deadline = time.monotonic() + 20
        while manager.requests_sent < 3:  # answered NOT_CONTROLLER, sent again
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert not first.done() and manager.pending == 1
        await manager.shutdown()
        assert first.result() == ErrorCode.OPERATION_NOT_ATTEMPTED

    asyncio.run(asyncio.wait_for(main(), 60))


def test_no_controller_known_keeps_the_change_queued() -> None:
    async def main() -> None:
        manager = AlterPartitionManager(
            1, lambda: 5, lambda: None, lambda t: TOPIC_ID, retry_backoff_ms=10
        )
        manager.start()
        change = manager.submit(TP, LeaderAndIsr(1, 3, (1, 2), 7))
        deadline = time.monotonic() + 20
        while manager.attempts < 3:  # tried, found no controller, backed off, tried again
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert not change.done() and manager.pending == 1 and manager.requests_sent == 0
        await manager.shutdown()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_shutdown_ends_the_loop_when_a_cancel_is_lost() -> None:
    """Python 3.11's wait_for drops a cancel that arrives as its future completes (closing a
    connection): the retry loop then goes on; shutdown cancels again until it has ended."""

    async def main() -> None:
        manager = AlterPartitionManager(1, lambda: 5, lambda: None, lambda topic: TOPIC_ID)
        swallowed = 0

        async def loses_the_first_cancel() -> None:
            nonlocal swallowed
            while True:
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    swallowed += 1
                    if swallowed > 1:
                        raise

        manager._task = asyncio.get_running_loop().create_task(loses_the_first_cancel())
        await asyncio.sleep(0)  # the task runs into its loop
        future = manager.submit(TP, LeaderAndIsr(1, 3, (1,), 7))
        await manager.shutdown()
        assert swallowed == 2 and manager._task is None
        assert future.result() == ErrorCode.OPERATION_NOT_ATTEMPTED

    asyncio.run(asyncio.wait_for(main(), 30))
