"""Durable mode (flush.messages=1) with group commit: appends of one event-loop turn share one
fsync per log; the HW (what consumers see) and the producers' answers wait for it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import confluent_kafka as ck

from tidelog.config.broker_config import BrokerConfig
from tidelog.records import RecordBatchBuilder
from tidelog.server.replica_manager import ReplicaManager
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("durable", 0)


def _rm(tmp_path: Path, flush_messages: str = "1") -> ReplicaManager:
    rm = ReplicaManager(BrokerConfig({"log.dirs": str(tmp_path)}), ManualClock())
    rm.startup()
    rm.create_topic(TP.topic, 1, {"flush.messages": flush_messages})
    return rm


def _batch(n: int = 3) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k", b"v%d" % i)
    return b.build()


def test_one_fsync_per_log_per_turn_and_hw_after_it(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    flushes: list[int] = []
    real_flush = lg.flush
    lg.flush = lambda offset=None: (flushes.append(lg.log_end_offset), real_flush(offset))

    async def turn() -> None:
        for _ in range(5):  # five producers' appends in one turn
            rm.append(TP, _batch(), group_commit=True)
        # appended, not yet on disk: not visible to consumers, not answered
        assert lg.log_end_offset == 15 and lg.high_watermark == 0 and lg.recovery_point == 0
        waiter = rm.group_commit.waiter(TP)
        assert waiter is not None and not waiter.done()
        assert await waiter is None
        assert flushes == [15]  # one fsync covered all five appends
        assert lg.recovery_point == 15 and lg.high_watermark == 15

    asyncio.run(turn())
    rm.shutdown()


def test_without_a_due_flush_nothing_waits(tmp_path: Path) -> None:
    rm = _rm(tmp_path, flush_messages="1000")
    lg = rm.get_log(TP)

    async def turn() -> None:
        rm.append(TP, _batch(), group_commit=True)
        assert rm.group_commit.waiter(TP) is None
        assert lg.high_watermark == 3 and lg.recovery_point == 0

    asyncio.run(turn())
    rm.shutdown()


def test_a_failed_flush_reaches_the_waiters_and_keeps_the_hw(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    reported: list[BaseException] = []
    rm._report_io_error = lambda _lg, exc, _op: reported.append(exc) or True  # type: ignore[method-assign]

    def failing_flush(offset: Any = None) -> None:
        raise OSError(5, "Input/output error")

    lg.flush = failing_flush

    async def turn() -> BaseException | None:
        rm.append(TP, _batch(), group_commit=True)
        waiter = rm.group_commit.waiter(TP)
        assert waiter is not None
        return await waiter

    error = asyncio.run(turn())
    assert isinstance(error, OSError) and reported == [error]
    assert lg.high_watermark == 0  # never visible: it may not be on disk
    rm.shutdown()


def test_producers_in_durable_mode_share_fsyncs_through_the_broker() -> None:
    """Eight librdkafka producers, acks=all, flush.messages=1: every record acknowledged and
    readable, in fewer fsync rounds than produce requests."""
    with EmbeddedBroker() as broker:
        rm = broker.broker.replica_manager
        broker.run(_create(rm))
        requests = [0]
        real_append = rm.append

        def counting_append(tp: TopicPartition, records: bytes, **kw: Any) -> Any:
            requests[0] += 1
            return real_append(tp, records, **kw)

        rm.append = counting_append
        per_producer, producers = 200, 8
        errors: list[object] = []
        threads = [threading.Thread(target=_produce,
                                    args=(broker.bootstrap_servers, per_producer, errors))
                   for _ in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        lg = rm.get_log(TP)
        total = per_producer * producers
        assert lg.log_end_offset == total and lg.high_watermark == total
        assert lg.recovery_point == total  # every acknowledged record is on disk
        assert 0 < rm.group_commit.flushes < requests[0]


async def _create(rm: ReplicaManager) -> None:
    rm.create_topic(TP.topic, 1, {"flush.messages": "1"})


def _produce(bootstrap: str, n: int, errors: list[object]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "batch.num.messages": 5})

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce(TP.topic, b"v%d" % i, partition=0, on_delivery=on_delivery)
        p.poll(0)
    if p.flush(60) != 0:
        errors.append("unflushed")
