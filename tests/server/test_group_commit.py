"""Durable mode (flush.messages=1) with group commit: appends share fsyncs, the fsync runs off
the event loop, and while one round is on the disk the next one gathers every append that
arrives; the HW (what consumers see) and the producers' answers wait for the round that put
their records on disk, and a failed fsync answers KAFKA_STORAGE_ERROR, never an ack."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from tidelog.server.replica_manager import ReplicaManager
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.index.offset_index import OffsetIndex
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fault"))
from fault_loopfs import loop_fs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_support import plain_batch, started_replica_manager

TP = TopicPartition("durable", 0)


def _rm(tmp_path: Path, flush_messages: str = "1") -> ReplicaManager:
    return started_replica_manager(tmp_path, TP.topic, 1, {"flush.messages": flush_messages})


@contextmanager
def _counting_fsyncs(suffix: str) -> Iterator[list[str]]:
    """Every real os.fsync of a file whose path ends with ``suffix`` (found through /proc)."""
    real = os.fsync
    seen: list[str] = []

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        path = os.readlink(f"/proc/self/fd/{fd}")
        real(fd)
        if path.endswith(suffix):
            seen.append(path)

    os.fsync = fsync  # type: ignore[assignment]
    try:
        yield seen
    finally:
        os.fsync = real


class _Gate:
    """Holds a log's group commit rounds on their worker thread until released; records the
    offset each round flushed to."""

    def __init__(self, lg: Any, fail: BaseException | None = None) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.targets: list[int] = []
        real = lg.flush_outside_lock

        def held(offset: int) -> None:
            self.targets.append(offset)
            self.entered.set()
            assert self.release.wait(30)
            if fail is not None:
                raise fail
            real(offset)

        lg.flush_outside_lock = held


def test_one_round_covers_every_append_of_a_turn_and_the_hw_waits_for_it(
    tmp_path: Path,
) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)

    async def turn() -> list[str]:
        with _counting_fsyncs(".log") as fsyncs:
            for _ in range(5):  # five producers' appends in one turn
                rm.append(TP, plain_batch(), group_commit=True)
            # appended, not yet on disk: not visible to consumers, not answered
            assert lg.log_end_offset == 15 and lg.high_watermark == 0
            assert lg.recovery_point == 0
            waiter = rm.group_commit.waiter(TP)
            assert waiter is not None and not waiter.done()
            assert await waiter is None
        return fsyncs

    fsyncs = asyncio.run(turn())
    assert fsyncs == [str(lg.active_segment.log.path)]  # one fsync covered all five appends
    assert lg.recovery_point == 15 and lg.high_watermark == 15
    assert rm.group_commit.flushes == 1
    rm.shutdown()


def test_appends_during_a_round_form_the_next_one_and_the_hw_follows_the_disk(
    tmp_path: Path,
) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    gate = _Gate(lg)

    async def scenario() -> None:
        rm.append(TP, plain_batch(), group_commit=True)
        first = rm.group_commit.waiter(TP)
        assert first is not None
        await asyncio.to_thread(gate.entered.wait, 30)  # round 1 is on its worker thread
        # the loop is free: three more appends land while round 1 is on the disk
        for _ in range(3):
            rm.append(TP, plain_batch(), group_commit=True)
            await asyncio.sleep(0)
        second = rm.group_commit.waiter(TP)
        assert second is not None and second is not first
        assert lg.log_end_offset == 12 and lg.high_watermark == 0
        gate.release.set()
        assert await first is None
        # round 1 flushed offsets [0, 3): the HW stops there, not at the LEO
        assert lg.high_watermark == 3 and not second.done()
        assert await second is None
        assert lg.high_watermark == 12 and lg.recovery_point == 12

    asyncio.run(scenario())
    assert gate.targets == [3, 12]  # the three later appends shared one round
    rm.shutdown()


def test_without_a_due_flush_nothing_waits(tmp_path: Path) -> None:
    rm = _rm(tmp_path, flush_messages="1000")
    lg = rm.get_log(TP)

    async def turn() -> None:
        rm.append(TP, plain_batch(), group_commit=True)
        assert rm.group_commit.waiter(TP) is None
        assert lg.high_watermark == 3 and lg.recovery_point == 0

    asyncio.run(turn())
    rm.shutdown()


def test_a_failed_flush_fails_its_round_and_the_appends_made_during_it(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    reported: list[BaseException] = []
    rm._report_io_error = lambda _lg, exc, _op: reported.append(exc) or True  # type: ignore[method-assign]
    failure = KafkaStorageError("Error while flush: [Errno 5] Input/output error")
    gate = _Gate(lg, fail=failure)

    async def scenario() -> tuple[Any, Any]:
        rm.append(TP, plain_batch(), group_commit=True)
        first = rm.group_commit.waiter(TP)
        await asyncio.to_thread(gate.entered.wait, 30)
        rm.append(TP, plain_batch(), group_commit=True)  # after the fsync began: its pages may be gone
        second = rm.group_commit.waiter(TP)
        gate.release.set()
        assert first is not None and second is not None
        return await first, await second

    errors = asyncio.run(scenario())
    assert errors == (failure, failure) and reported == [failure]
    assert gate.targets == [3]  # no second round after a failed fsync
    assert lg.high_watermark == 0  # never visible: it may not be on disk
    rm.shutdown()


def test_a_failing_completion_still_answers_and_the_next_round_runs(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    woken: list[TopicPartition] = []

    def listener(tp: TopicPartition) -> None:  # e.g. a delayed fetch's wake-up that raises
        woken.append(tp)
        raise RuntimeError("listener failed")

    rm.add_append_listener(listener)

    async def scenario() -> tuple[Any, Any]:
        rm.append(TP, plain_batch(), group_commit=True)
        first = rm.group_commit.waiter(TP)
        assert first is not None
        result = await asyncio.wait_for(first, 30)
        rm.append(TP, plain_batch(), group_commit=True)
        second = rm.group_commit.waiter(TP)
        assert second is not None
        return result, await asyncio.wait_for(second, 30)

    assert asyncio.run(scenario()) == (None, None)  # the records are on disk: answered
    assert woken == [TP, TP] and lg.recovery_point == 6 and lg.high_watermark == 6
    rm.shutdown()


def test_a_closed_log_is_never_reported_flushed(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    lg = rm.get_log(TP)
    lg.append_as_leader(plain_batch(), defer_flush=True)
    lg.close()
    with pytest.raises(KafkaStorageError):
        lg.flush_outside_lock(3)
    assert lg.recovery_point == 0
    rm.shutdown()


def test_an_index_flush_waits_for_the_fsync_in_progress(tmp_path: Path) -> None:
    """Index fsyncs run outside the index's lock (appends never wait for the disk), but a
    second flush (the scheduler's, a round's) must not return, and let a recovery point be
    marked, while the first one's fsync has not ended."""
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=800)
    index.append(5, 100)
    in_fsync, release = threading.Event(), threading.Event()
    real = os.fsync

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "first":
            in_fsync.set()
            assert release.wait(30)
        real(fd)

    os.fsync = slow_fsync  # type: ignore[assignment]
    try:
        first = threading.Thread(target=index.flush, name="first")
        first.start()
        assert in_fsync.wait(30)
        second = threading.Thread(target=index.flush, name="second")
        second.start()
        second.join(0.5)  # returning at once here would claim an fsync not yet done
        assert second.is_alive()
        index.append(6, 200)  # while both wait: an append does not wait for the disk
        release.set()
        first.join(30)
        second.join(30)
        assert not first.is_alive() and not second.is_alive()
    finally:
        release.set()
        os.fsync = real
    assert index.lookup(6).position == 200
    index.close()


# -- through the broker, real clients ---------------------------------------------------------
def test_producers_share_fsyncs_and_every_ack_follows_its_fsync() -> None:
    """Eight librdkafka producers, acks=all, flush.messages=1: every record acknowledged and
    readable, the segment fsynced fewer times than there were produce requests, and each
    acknowledgement arrived when the recovery point (what is on disk) had passed it."""
    with EmbeddedBroker() as broker:
        rm = broker.broker.replica_manager
        broker.run(_create(rm, TP.topic, {"flush.messages": "1"}))
        lg = rm.get_log(TP)
        per_producer, producers = 200, 8
        errors: list[object] = []
        early: list[tuple[int, int]] = []

        def on_ack(offset: int) -> None:
            point = lg.recovery_point  # read on the client's thread as the ack arrives
            if point <= offset:
                early.append((offset, point))

        with _counting_fsyncs(".log") as fsyncs:
            threads = [threading.Thread(target=_produce, args=(
                broker.bootstrap_servers, TP.topic, per_producer, errors, on_ack))
                for _ in range(producers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        assert errors == [] and early == []
        total = per_producer * producers
        assert lg.log_end_offset == total and lg.high_watermark == total
        assert lg.recovery_point == total  # every acknowledged record is on disk
        stats = rm.topic_stats
        assert stats is not None
        requests = stats.topic(TP.topic).total_produce_requests  # (one per Produce appended)
        assert 0 < len(fsyncs) <= rm.group_commit.flushes < requests
        assert _consume(broker.bootstrap_servers, TP.topic, total) == total


def test_kafka_python_and_aiokafka_acks_follow_the_fsync() -> None:
    """An idempotent kafka-python producer (acks=all) and an aiokafka one with acks=1, side by
    side on a durable partition: each acknowledgement arrives once the record is on disk."""
    import aiokafka
    import kafka

    with EmbeddedBroker() as broker:
        rm = broker.broker.replica_manager
        broker.run(_create(rm, TP.topic, {"flush.messages": "1"}))
        lg = rm.get_log(TP)
        early: list[tuple[int, int]] = []
        acked: list[int] = []

        def on_ack(offset: int) -> None:
            point = lg.recovery_point
            acked.append(offset)
            if point <= offset:
                early.append((offset, point))

        def kafka_python() -> None:
            p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                                    enable_idempotence=True, linger_ms=1)
            for i in range(300):  # the callback runs on the client's thread as the ack lands
                p.send(TP.topic, b"kp-%d" % i, partition=0).add_callback(
                    lambda md: on_ack(md.offset))
            p.flush(60)
            p.close(10)

        async def aiokafka_acks_1() -> None:
            p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1,
                                          linger_ms=1)
            await p.start()
            try:
                for i in range(300):
                    md = await p.send_and_wait(TP.topic, b"aio-%d" % i, partition=0)
                    on_ack(md.offset)
            finally:
                await p.stop()

        t = threading.Thread(target=kafka_python)
        t.start()
        asyncio.run(aiokafka_acks_1())
        t.join(60)
        assert early == [] and sorted(acked) == list(range(600))
        assert lg.high_watermark == lg.recovery_point == 600


def test_the_loop_serves_others_while_a_durable_round_is_on_the_disk() -> None:
    """The fsync runs on a worker thread: with a durable round held there, a producer of a
    topic without fsync is answered at once, and the durable producer only after the
    round ends."""
    with EmbeddedBroker() as broker:
        rm = broker.broker.replica_manager
        broker.run(_create(rm, TP.topic, {"flush.messages": "1"}))
        broker.run(_create(rm, "plain", {}))
        gate = _Gate(rm.get_log(TP))
        durable = _AckingProducer(broker.bootstrap_servers, TP.topic)
        plain = _AckingProducer(broker.bootstrap_servers, "plain")
        try:
            durable.send(b"durable")
            assert gate.entered.wait(30)
            plain.send(b"plain")
            assert _until(lambda: plain.acked == [0]), "the loop was blocked by the fsync"
            assert durable.acked == [] and rm.get_log(TP).high_watermark == 0
            gate.release.set()
            assert _until(lambda: durable.acked == [0])
        finally:
            gate.release.set()
            durable.close()
            plain.close()


def test_a_failed_fsync_on_a_real_file_system_answers_kafka_storage_error(
    tmp_path: Path,
) -> None:
    """A durable partition on an xfs file system: records appended (in the page cache) while
    a round waits, then the file system fails under the fsync (xfs shutdown: EIO). The
    producers of that round and of the round gathered during it get KAFKA_STORAGE_ERROR,
    none an ack; the dir goes offline; the other dir keeps acknowledging."""
    healthy = tmp_path / "healthy"
    with loop_fs(tmp_path, "xfs") as fs:
        failing = fs.mountpoint / "data"
        healthy.mkdir()
        failing.mkdir()
        config = {"log.dirs": f"{healthy},{failing}", "num.partitions": "2"}
        with EmbeddedBroker(config, log_dir=healthy) as broker:
            rm = broker.broker.replica_manager
            broker.run(_create(rm, TP.topic, {"flush.messages": "1"}, partitions=2))
            on = {p: Path(rm.get_log(TopicPartition(TP.topic, p)).dir).parent for p in (0, 1)}
            bad = next(p for p, d in on.items() if d == failing)
            good = 1 - bad
            lg = rm.get_log(TopicPartition(TP.topic, bad))
            first = _AckingProducer(broker.bootstrap_servers, TP.topic, partition=bad)
            second = _AckingProducer(broker.bootstrap_servers, TP.topic, partition=bad)
            other = _AckingProducer(broker.bootstrap_servers, TP.topic, partition=good)
            try:
                first.send(b"before")
                assert _until(lambda: first.acked == [0])
                gate = _Gate(lg)
                first.send(b"in the failing round")
                assert gate.entered.wait(30)
                second.send(b"gathered during it")
                assert _until(lambda: lg.log_end_offset == 3)  # both in the page cache
                fs.shutdown()
                gate.release.set()
                assert _until(lambda: len(first.failed) == 1 and len(second.failed) == 1)
                assert first.failed == ["KAFKA_STORAGE_ERROR"] == second.failed
                assert first.acked == [0] and second.acked == []
                assert lg.high_watermark == 1  # the unflushed records never became visible
                channel = rm.logs.failure_channel
                reason = channel.offline_reason(failing) or ""
                assert "flushing" in reason and "Input/output error" in reason, reason
                other.send(b"elsewhere")
                assert _until(lambda: other.acked == [0])
            finally:
                for p in (first, second, other):
                    p.close()


# -- helpers ----------------------------------------------------------------------------------
async def _create(
    rm: ReplicaManager, topic: str, configs: dict[str, str], partitions: int = 1
) -> None:
    rm.create_topic(topic, partitions, configs)


def _until(cond: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


class _AckingProducer:
    """acks=all, no retries (an error is reported, not retried), one record per request."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0) -> None:
        self.topic, self.partition = topic, partition
        self.acked: list[int] = []
        self.failed: list[str] = []
        self._p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                               "retries": 0, "message.timeout.ms": 60_000})
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def send(self, value: bytes) -> None:
        self._p.produce(self.topic, value, partition=self.partition, on_delivery=self._report)

    def _report(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.offset())
        else:
            self.failed.append(err.name())

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._p.poll(0.01)

    def close(self) -> None:
        self._stop.set()
        self._poller.join(10)
        self._p.flush(10)


def _produce(bootstrap: str, topic: str, n: int, errors: list[object],
             on_ack: Callable[[int], None]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "batch.num.messages": 5})

    def on_delivery(err: object, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            on_ack(msg.offset())

    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0, on_delivery=on_delivery)
        p.poll(0)
    if p.flush(60) != 0:
        errors.append("unflushed")


def _consume(bootstrap: str, topic: str, want: int) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "gc-check",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < want and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
    finally:
        c.close()
    return got
