"""A LeaderAndIsr making 1,000 new partitions, sent over the wire as a controller sends it,
while other clients keep being answered: with the logs' creation held at a gate, ApiVersions,
Metadata and a produce to another topic are answered, a produce to a partition being made
is answered as one not hosted here, and the LeaderAndIsr itself only once every log exists.
The gate, not the machine's speed, decides what happens first."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.storage.log import Log
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

PARTITIONS = 1000
DEADLINE_S = 60.0
ANSWER_S = 10.0  # generous: an answer the loop is free to give comes in milliseconds


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    # as in a cluster: a produce to a partition not hosted here creates nothing
    with EmbeddedBroker({"auto.create.topics.enable": "false"}, log_dir=tmp_path) as b:
        yield b


def leader_and_isr(node: int, topic: str, n: int) -> dict[str, Any]:
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": node, "leader_epoch": 0,
              "isr": [node], "partition_epoch": 0, "replicas": [node], "is_new": True}
             for p in range(n)]  # fmt: skip
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": uuid.uuid4(),
                              "partition_states": parts}], "live_leaders": []}  # fmt: skip


def produce(conn: BrokerConnection, topic: str) -> int:
    records = build_batch([(0, None, b"v")])
    resp = conn.call(0, 9, {"acks": 1, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


def hold_log_creation(b: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch,
                      ) -> tuple[threading.Event, threading.Event]:
    """(entered, open): every log creation of the broker waits for ``open``."""
    entered, gate = threading.Event(), threading.Event()
    logs = b.broker.replica_manager.logs
    real = logs.get_or_create_log

    def held(tp: TopicPartition, overrides: Mapping[str, str] | None = None) -> Log:
        entered.set()
        gate.wait(DEADLINE_S)
        return real(tp, overrides)

    monkeypatch.setattr(logs, "get_or_create_log", held)
    return entered, gate


def test_the_broker_answers_others_while_a_leader_and_isr_makes_1000_logs(
        broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    client = BrokerConnection("127.0.0.1", broker.port, client_id="client", timeout_s=ANSWER_S)
    controller = BrokerConnection("127.0.0.1", broker.port, client_id="controller",
                                  timeout_s=DEADLINE_S)
    pool = ThreadPoolExecutor(1)
    try:
        created = client.call(19, 5, {"topics": [
            {"name": "other", "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": []}], "timeout_ms": 30_000, "validate_only": False})
        assert int(created.topics[0].error_code) == ErrorCode.NONE
        entered, gate = hold_log_creation(broker, monkeypatch)
        try:
            body = leader_and_isr(broker.broker.node_id, "big", PARTITIONS)
            answer = pool.submit(controller.call, 4, 7, body)
            assert entered.wait(DEADLINE_S)
            # the loop is free: other requests are answered while the logs are held
            assert int(client.call(18, 3, {}).error_code) == ErrorCode.NONE
            md = client.call(3, 12, {"topics": [{"name": "other"}]})
            assert int(md.topics[0].error_code) == ErrorCode.NONE
            assert produce(client, "other") == ErrorCode.NONE
            assert produce(client, "big") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert not answer.done()  # answered only once the logs exist
        finally:
            gate.set()
        resp = answer.result(DEADLINE_S)
        errors = [int(p.error_code) for t in resp.topics for p in t.partition_errors]
        assert errors == [ErrorCode.NONE] * PARTITIONS
        hosted = broker.broker.replica_manager.partitions
        assert sum(tp.topic == "big" and p.is_leader for tp, p in hosted.items()) == PARTITIONS
    finally:
        pool.shutdown(wait=False)
        client.close()
        controller.close()
