"""A LeaderAndIsr making 1,000 new partitions, sent over the wire as a controller sends it,
while other clients keep being answered: with the logs' creation held at a gate, ApiVersions,
Metadata and a produce to another topic are answered, a produce to a partition being made
is answered as one not hosted here, and the LeaderAndIsr itself only once every log exists.
A failover making this broker leader of 1,000 partitions at a new leader epoch: each new
epoch's ``leader-epoch-checkpoint`` (tmp, fsync, rename) is written off the event loop, before
the LeaderAndIsr is answered; with those writes held, other clients are answered, an
OffsetForLeaderEpoch already sees the new epoch, and a produce to one of the partitions
waits for its own epoch's checkpoint (no record of an epoch is written before the checkpoint
naming it). The gates, not the machine's speed, decide what happens first."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from leader_epoch_support import (
    create_topic,
    epoch_end,
    lai_errors,
    leader_and_isr_at,
    produce_records,
)

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.storage.checkpoints import CheckpointFile
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE
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

    def held(tp: TopicPartition, overrides: Mapping[str, str] | None = None,
             read_at: int | None = None) -> Log:
        entered.set()
        gate.wait(DEADLINE_S)
        return real(tp, overrides, read_at)

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


class CheckpointGate:
    """Holds every leader-epoch-checkpoint write of the process until opened; records which
    partition dirs were written from which threads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        self.held: list[tuple[str, int]] = []  # (partition dir, thread) in arrival order
        self._cond = threading.Condition()
        real = CheckpointFile.write

        def held(file: CheckpointFile[Any], entries: Any) -> None:
            if file.path.name == LEADER_EPOCH_CHECKPOINT_FILE:
                with self._cond:
                    self.held.append((file.path.parent.name, threading.get_ident()))
                    self._cond.notify_all()
                assert self.open.wait(DEADLINE_S)
            real(file, entries)

        monkeypatch.setattr(CheckpointFile, "write", held)

    def reached(self, dir_name: str) -> bool:
        """Wait until a write for ``dir_name`` is held."""
        with self._cond:
            return self._cond.wait_for(lambda: any(d == dir_name for d, _ in self.held),
                                       DEADLINE_S)


def checkpoint(log_dir: Path, topic: str, partition: int) -> str:
    return (log_dir / f"{topic}-{partition}" / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_a_failover_of_1000_partitions_writes_their_epochs_off_the_loop(
        broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = broker.broker.node_id
    client = BrokerConnection("127.0.0.1", broker.port, client_id="client", timeout_s=ANSWER_S)
    producer = BrokerConnection("127.0.0.1", broker.port, client_id="producer",
                                timeout_s=DEADLINE_S)
    controller = BrokerConnection("127.0.0.1", broker.port, client_id="controller",
                                  timeout_s=DEADLINE_S)
    pool = ThreadPoolExecutor(2)
    try:
        assert create_topic(controller, "other", 1) == ErrorCode.NONE
        assert create_topic(controller, "big", PARTITIONS) == ErrorCode.NONE  # led at epoch 0
        assert produce_records(client, "big", 0, 3) == (ErrorCode.NONE, 0)  # epoch 0: offsets 0-2
        assert produce(client, "other") == ErrorCode.NONE  # (its epoch 0 written)
        gate = CheckpointGate(monkeypatch)
        try:
            answer = pool.submit(controller.call, 4, 7,
                                 leader_and_isr_at(node, "big", PARTITIONS, 1))
            assert gate.reached("big-0")  # the first of the request's checkpoints, held
            # the loop is free: other requests are answered while the writes are held
            assert int(client.call(18, 3, {}).error_code) == ErrorCode.NONE
            md = client.call(3, 12, {"topics": [{"name": "other"}]})
            assert int(md.topics[0].error_code) == ErrorCode.NONE
            assert produce(client, "other") == ErrorCode.NONE
            # the new epoch is in memory at once: epoch 0 of partition 0 ends where 1 starts
            assert epoch_end(client, "big", 0, 1, 0) == (ErrorCode.NONE, 0, 3)
            # a record of epoch 1 is written only once its epoch's checkpoint is
            late = pool.submit(produce_records, producer, "big", 7)
            assert gate.reached("big-7")
            assert not late.done() and not answer.done()
        finally:
            gate.open.set()
        assert lai_errors(answer.result(DEADLINE_S)) == [ErrorCode.NONE] * PARTITIONS
        assert late.result(DEADLINE_S) == (ErrorCode.NONE, 0)
        loop_thread = broker._thread.ident if broker._thread is not None else None
        assert loop_thread is not None and all(t != loop_thread for _, t in gate.held)
        # one write for each partition: in one pass on one thread, but big-7's, written
        # for its append (the pass found it written)
        assert sorted(d for d, _ in gate.held) == sorted(f"big-{p}" for p in range(PARTITIONS))
        assert len({t for d, t in gate.held if d != "big-7"}) == 1
    finally:
        pool.shutdown(wait=False)
        client.close()
        producer.close()
        controller.close()
    assert checkpoint(tmp_path, "big", 0) == "0\n2\n0 0\n1 3\n"
    for p in range(1, PARTITIONS):
        assert checkpoint(tmp_path, "big", p) == "0\n1\n1 0\n"
    hosted = broker.broker.replica_manager.partitions
    assert {p.leader_epoch for tp, p in hosted.items() if tp.topic == "big"} == {1}
