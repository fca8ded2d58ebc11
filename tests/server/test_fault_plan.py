"""Faults on demand (``EmbeddedBroker(fault_plan=...)``): each fault fires exactly as armed,
against real clients over real sockets, and the broker is untouched once it is spent."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, fetch_body, produce_body
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient

from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker, FaultPlan
from tidelog.util.topic_partition import TopicPartition

TS = 1_700_000_000_000
PRODUCE, METADATA = 0, 3


@pytest.fixture
def plan() -> FaultPlan:
    return FaultPlan()


@pytest.fixture
def broker(plan: FaultPlan) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"auto.create.topics.enable": "false"}, fault_plan=plan) as b:
        b.run(_create(b, "t", 2))
        yield b


async def _create(b: EmbeddedBroker, name: str, partitions: int, **configs: str) -> None:
    b.broker.replica_manager.create_topic(name, partitions, configs)


def _end_offset(b: EmbeddedBroker, topic: str, partition: int) -> int:
    log = b.broker.replica_manager.logs.get_log(TopicPartition(topic, partition))
    return int(log.log_end_offset)


def _produce(w: Wire, parts: dict[int, bytes], version: int = 9, acks: int = 1) -> Any:
    resp: Any = w.call(PRODUCE, version, body=produce_body(version, "t", parts, acks))
    return {p.index: p for t in resp.responses for p in t.partition_responses}


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_a_failed_partition_is_not_appended_and_its_neighbour_is(
    broker: EmbeddedBroker, plan: FaultPlan, version: int
) -> None:
    plan.fail_produce("t", 0, ErrorCode.NOT_ENOUGH_REPLICAS, times=2)
    batch = build_batch([(TS, b"k", b"v")])
    with Wire(broker) as w:
        for attempt in range(2):
            got = _produce(w, {0: batch, 1: batch}, version)
            assert got[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS and got[0].base_offset == -1
            assert (got[1].error_code, got[1].base_offset) == (0, attempt)
        got = _produce(w, {0: batch}, version)  # spent: the partition appends again
        assert (got[0].error_code, got[0].base_offset) == (0, 0)
    assert (_end_offset(broker, "t", 0), _end_offset(broker, "t", 1)) == (1, 2)
    assert [f.detail for f in plan.injected] == ["t-0: NOT_ENOUGH_REPLICAS"] * 2
    assert plan.pending == 0


def test_librdkafka_retries_a_retriable_fault_and_fails_on_a_fatal_one(
    broker: EmbeddedBroker, plan: FaultPlan
) -> None:
    plan.fail_produce("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=3)
    plan.fail_produce("t", 1, ErrorCode.INVALID_RECORD)
    reports: dict[int, KafkaError | None] = {}
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                  "retry.backoff.ms": 10, "linger.ms": 5})  # fmt: skip
    for part in (0, 1):
        p.produce("t", b"v", partition=part,
                  on_delivery=lambda err, msg: reports.__setitem__(msg.partition(), err))  # fmt: skip
    assert p.flush(30) == 0
    assert reports[0] is None  # delivered after three retriable failures, once
    err = reports[1]
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert (_end_offset(broker, "t", 0), _end_offset(broker, "t", 1)) == (1, 0)
    assert sum(f.kind == "produce" for f in plan.injected) == 4


def test_delayed_responses_come_late_and_in_order(broker: EmbeddedBroker, plan: FaultPlan) -> None:
    plan.delay_responses(PRODUCE, 400, times=1)
    batch = build_batch([(TS, None, b"v")])
    with Wire(broker) as w:
        start = time.monotonic()
        w.send(PRODUCE, 9, body=produce_body(9, "t", {0: batch}))
        w.send(PRODUCE, 9, body=produce_body(9, "t", {1: batch}))
        first, second = w.recv(PRODUCE, 9), w.recv(PRODUCE, 9)
        elapsed = time.monotonic() - start
    assert elapsed >= 0.4  # the first answer waited, and the second behind it
    assert [r.responses[0].partition_responses[0].index for r in (first, second)] == [0, 1]  # type: ignore[attr-defined]
    assert [f.kind for f in plan.injected] == ["delay"]


def test_a_connection_is_dropped_after_k_requests(broker: EmbeddedBroker, plan: FaultPlan) -> None:
    plan.drop_connection_after(2, api_key=PRODUCE)
    batch = build_batch([(TS, None, b"v")])
    with Wire(broker) as first, Wire(broker) as second:
        for _ in range(2):  # each connection counts its own requests
            assert _produce(first, {0: batch})[0].error_code == 0
            assert _produce(second, {1: batch})[1].error_code == 0
        first.send(PRODUCE, 9, body=produce_body(9, "t", {0: batch}))
        with pytest.raises((ConnectionError, socket.timeout, OSError)):
            first.recv(PRODUCE, 9)
        assert _produce(second, {1: batch})[1].base_offset == 2  # spent: the other goes on
    assert _end_offset(broker, "t", 0) == 2  # the dropped request was never handled
    assert [f.kind for f in plan.injected] == ["drop"]
    with Wire(broker) as w:  # a new connection is served
        assert _produce(w, {0: batch})[0].base_offset == 2


def test_moving_the_clock_expires_retention(plan: FaultPlan) -> None:
    config = {"log.retention.check.interval.ms": "50", "log.initial.task.delay.ms": "0",
              "log.segment.bytes": "1024"}
    with EmbeddedBroker(config, fault_plan=plan) as b:
        b.run(_create(b, "r", 1, **{"retention.ms": "3600000"}))
        now = plan.clock.milliseconds()
        with Wire(b) as w:
            for i in range(5):  # five segments of one batch each
                body = produce_body(9, "r", {0: build_batch([(now, None, b"x" * 900)])})
                resp: Any = w.call(PRODUCE, 9, body=body)
                assert resp.responses[0].partition_responses[0].base_offset == i
        log = b.broker.replica_manager.logs.get_log(TopicPartition("r", 0))
        assert log.log_start_offset == 0
        plan.advance_clock(2 * 3600_000)  # two hours later, by the broker's clock
        deadline = time.monotonic() + 20
        while log.log_start_offset < 4:
            assert time.monotonic() < deadline, log.log_start_offset
            time.sleep(0.05)


def test_a_filled_log_dir_refuses_produce_and_keeps_reads_and_commits(
    broker: EmbeddedBroker, plan: FaultPlan
) -> None:
    batch = build_batch([(TS, b"k", b"v")])
    with Wire(broker) as w:
        assert _produce(w, {0: batch})[0].base_offset == 0
        plan.fill_log_dir(broker.log_dir)
        refused = _produce(w, {0: batch, 1: batch})
        assert {p.error_code for p in refused.values()} == {ErrorCode.NOT_ENOUGH_REPLICAS}
        assert "log.dir.min.free.bytes" in refused[0].error_message
        fetched: Any = w.call(1, 12, body=fetch_body(12, "t", {0: 0}))
        assert fetched.responses[0].partitions[0].error_code == 0
        assert fetched.responses[0].partitions[0].high_watermark == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                         "enable.auto.commit": False})  # fmt: skip
    try:  # a group commit is a coordinator write: the reserve below the floor takes it
        offsets = consumer.commit(offsets=[CkTopicPartition("t", 0, 1)], asynchronous=False)
        assert offsets is not None and offsets[0].error is None
        (committed,) = consumer.committed([CkTopicPartition("t", 0)], timeout=10)
        assert committed.offset == 1
    finally:
        consumer.close()
    plan.free_log_dir(broker.log_dir)  # space is back: the next produce appends, no restart
    with Wire(broker) as w:
        assert _produce(w, {0: batch})[0].base_offset == 1


def test_deletion_and_compaction_go_on_in_a_filled_dir(plan: FaultPlan) -> None:
    config = {"auto.create.topics.enable": "false", "log.cleaner.backoff.ms": "50"}
    with EmbeddedBroker(config, fault_plan=plan) as b:
        # nothing is cleanable for an hour (min.compaction.lag.ms), by the broker's clock
        b.run(_create(b, "compacted", 1, **{"cleanup.policy": "compact", "segment.bytes": "1024",
                                            "min.cleanable.dirty.ratio": "0.01",
                                            "min.compaction.lag.ms": "3600000"}))  # fmt: skip
        b.run(_create(b, "doomed", 1))
        with Wire(b) as w:
            now = plan.clock.milliseconds()
            for i in range(40):  # one key rewritten: most records are cleanable
                body = produce_body(9, "compacted", {0: build_batch([(now, b"k", b"%d" % i * 50)])})
                resp: Any = w.call(PRODUCE, 9, body=body)
                assert resp.responses[0].partition_responses[0].error_code == 0
        plan.fill_log_dir(b.log_dir)
        tp = TopicPartition("compacted", 0)
        lg = b.broker.replica_manager.logs.get_log(tp)
        size = lg.size_in_bytes
        assert lg.number_of_segments() > 3  # nothing cleaned yet
        plan.advance_clock(2 * 3600_000)  # now the records are old enough: cleaned while full
        deadline = time.monotonic() + 30
        while lg.size_in_bytes >= size // 2:  # the cleaner rewrites the segments
            assert time.monotonic() < deadline, (lg.size_in_bytes, size)
            time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.delete_topics(["doomed"])["doomed"].result(30)  # deletion is not an append
        assert b.broker.replica_manager.topic("doomed") is None
        assert plan.free_bytes_override(b.log_dir.resolve()) is not None  # still filled
