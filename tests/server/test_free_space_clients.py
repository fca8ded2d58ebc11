"""The free-space floor's wire error against the three client libraries' own retry logic:
idempotent librdkafka (confluent-kafka), kafka-python and aiokafka producers are refused with
NOT_ENOUGH_REPLICAS for as long as the log dir is full (filled through the fault plan), keep
retrying, and each delivers its record exactly once when space returns."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import aiokafka
import confluent_kafka
import kafka

from tidelog.testing import EmbeddedBroker, FaultPlan
from tidelog.util.topic_partition import TopicPartition


def _confluent(bootstrap: str, topic: str) -> None:
    errors: list[object] = []
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "message.timeout.ms": 120000})  # fmt: skip
    p.produce(topic, b"librdkafka", on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(120) == 0 and errors == [None], errors


def _kafka_python(bootstrap: str, topic: str) -> None:
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                            delivery_timeout_ms=120000, request_timeout_ms=30000)  # fmt: skip
    try:
        p.send(topic, b"kafka-python").get(timeout=120)
    finally:
        p.close(10)


def _aiokafka(bootstrap: str, topic: str) -> None:
    async def send() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                      acks="all")  # fmt: skip
        await p.start()
        try:
            await p.send_and_wait(topic, b"aiokafka")
        finally:
            await p.stop()

    asyncio.run(send())


def _wait_for(cond: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_three_clients_ride_out_a_full_log_dir() -> None:
    plan = FaultPlan()
    clients = {"librdkafka": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}
    with EmbeddedBroker({"auto.create.topics.enable": "false"}, fault_plan=plan) as b:

        async def create() -> None:
            for name in clients:  # a topic per client: its refusals are counted apart
                b.broker.replica_manager.create_topic(name, 1, {})

        b.run(create())
        plan.fill_log_dir(b.log_dir)
        failures: dict[str, BaseException] = {}

        def run(name: str, fn: Callable[[str, str], None]) -> None:
            try:
                fn(b.bootstrap_servers, name)
            except BaseException as exc:
                failures[name] = exc

        threads = [threading.Thread(target=run, args=item) for item in clients.items()]
        for t in threads:
            t.start()
        stats = b.broker.replica_manager.topic_stats

        def refused(name: str) -> int:
            return int(stats.topic(name).failed_produce_requests)

        # every client is refused again and again, and none gives up
        _wait_for(lambda: all(refused(name) >= 5 for name in clients), "5 refusals each")
        assert all(t.is_alive() for t in threads) and not failures, failures
        logs = [b.broker.replica_manager.logs.get_log(TopicPartition(n, 0)) for n in clients]
        assert [lg.log_end_offset for lg in logs] == [0, 0, 0]

        plan.free_log_dir(b.log_dir)  # space is back: each pending record goes in, once
        for t in threads:
            t.join(120)
        assert not failures, failures
        assert [lg.log_end_offset for lg in logs] == [1, 1, 1]
