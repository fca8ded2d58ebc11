"""A new partition's first leader epoch starts when it becomes leader, as in Kafka's
makeLeader, not with the first produce to it: one broker's CreateTopics answers with every
partition's ``leader-epoch-checkpoint`` on disk naming epoch 0 from offset 0, written off the
event loop; the first produce to each partition then writes no checkpoint (before, 1,000
partitions' first produces each wrote and fsynced one while the topic took its load). A
restart keeps the epoch; a LeaderAndIsr's first epoch is written before its answer too."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.storage.checkpoints import CheckpointFile
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE
from tidelog.testing import EmbeddedBroker

PARTITIONS = 40
TIMEOUT_S = 30.0
FIRST = "0\n1\n0 0\n"  # version 0, one entry: epoch 0 from offset 0


class Writes:
    """Every leader-epoch-checkpoint written in this process: (partition dir, thread id)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[str, int | None]] = []
        real = CheckpointFile.write

        def recorded(file: CheckpointFile[Any], entries: Any) -> None:
            real(file, entries)
            if file.path.name == LEADER_EPOCH_CHECKPOINT_FILE:
                self.seen.append((file.path.parent.name, threading.get_ident()))

        monkeypatch.setattr(CheckpointFile, "write", recorded)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        yield b


def connect(b: EmbeddedBroker, client_id: str = "first-epoch") -> BrokerConnection:
    return BrokerConnection("127.0.0.1", b.port, client_id=client_id, timeout_s=TIMEOUT_S)


def loop_thread(b: EmbeddedBroker) -> int | None:
    """The embedded broker's event-loop thread."""
    return b._thread.ident if b._thread is not None else None


def create(conn: BrokerConnection, name: str, partitions: int) -> int:
    resp = conn.call(19, 5, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1,
         "assignments": [], "configs": []}], "timeout_ms": 30_000, "validate_only": False})
    return int(resp.topics[0].error_code)


def produce_all(conn: BrokerConnection, name: str, partitions: int) -> list[int]:
    parts = [{"index": p, "records": build_batch([(0, None, b"v%d" % p)])}
             for p in range(partitions)]
    resp = conn.call(0, 9, {"acks": -1, "timeout": 30_000, "topic_data": [
        {"name": name, "partition_data": parts}]})
    return [int(p.error_code) for p in resp.responses[0].partition_responses]


def on_disk(log_dir: Path, name: str, partitions: int) -> list[str]:
    return [(log_dir / f"{name}-{p}" / LEADER_EPOCH_CHECKPOINT_FILE).read_text()
            for p in range(partitions)]


def test_create_topics_writes_epoch_0_off_the_loop_and_the_first_produce_writes_none(
        broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = Writes(monkeypatch)
    conn = connect(broker)
    try:
        assert create(conn, "fresh", PARTITIONS) == ErrorCode.NONE
        assert on_disk(tmp_path, "fresh", PARTITIONS) == [FIRST] * PARTITIONS
        assert sorted(d for d, _ in writes.seen) == sorted(f"fresh-{p}" for p in range(PARTITIONS))
        loop = loop_thread(broker)
        assert loop is not None and all(t != loop for _, t in writes.seen)
        writes.seen.clear()
        assert produce_all(conn, "fresh", PARTITIONS) == [ErrorCode.NONE] * PARTITIONS
        assert writes.seen == []  # the epoch the records carry is in the cache already
        assert on_disk(tmp_path, "fresh", PARTITIONS) == [FIRST] * PARTITIONS
    finally:
        conn.close()
    broker.restart()  # a clean restart keeps the epoch, and writes nothing new
    writes.seen.clear()
    conn = connect(broker)
    try:
        assert produce_all(conn, "fresh", PARTITIONS) == [ErrorCode.NONE] * PARTITIONS
        assert writes.seen == []
        assert on_disk(tmp_path, "fresh", PARTITIONS) == [FIRST] * PARTITIONS
    finally:
        conn.close()


def test_a_leader_and_isr_at_epoch_0_writes_it_before_its_answer(
        broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ZooKeeper path's first LeaderAndIsr of a new partition: its epoch-0 checkpoint
    is on disk when the request is answered, written off the loop (Kafka's makeLeader
    assigns every new epoch, the first included)."""
    writes = Writes(monkeypatch)
    assert broker.broker is not None
    me = broker.broker.node_id
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": me, "leader_epoch": 0,
              "isr": [me], "partition_epoch": 0, "replicas": [me], "is_new": True}
             for p in range(PARTITIONS)]  # fmt: skip
    conn = connect(broker, "controller")
    try:
        resp = conn.call(4, 7, {
            "controller_id": me, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": "led", "topic_id": uuid.uuid4(),
                              "partition_states": parts}], "live_leaders": []})  # fmt: skip
    finally:
        conn.close()
    assert {int(p.error_code) for t in resp.topics for p in t.partition_errors} == {0}
    assert on_disk(tmp_path, "led", PARTITIONS) == [FIRST] * PARTITIONS
    loop = loop_thread(broker)
    assert len(writes.seen) == PARTITIONS and all(t != loop for _, t in writes.seen)
