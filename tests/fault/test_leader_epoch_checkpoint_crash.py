"""SIGKILL a broker right after it answered a LeaderAndIsr moving 200 partitions it leads to
a new leader epoch (and two of them took records of it): each partition's
``leader-epoch-checkpoint`` names the new epoch already (written off the event loop, before
the answer). After a restart on the same log dir the recovered logs keep the epochs their
records carry: a partition with records of epoch 1 leads at epoch 1, epoch 0 ending where 1
starts; an entry no record follows is dropped, as Kafka's LogLoader drops it
(truncateFromEnd at the log end offset)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records import build_batch
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from serve_process import ServeProcess

PARTITIONS = 200
TIMEOUT_S = 60.0


def leader_and_isr(node: int, topic: str, n: int, epoch: int) -> dict[str, Any]:
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": node,
              "leader_epoch": epoch, "isr": [node], "partition_epoch": epoch,
              "replicas": [node], "is_new": False}
             for p in range(n)]  # fmt: skip
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": uuid.UUID(int=0),
                              "partition_states": parts}], "live_leaders": []}  # fmt: skip


def produce(conn: BrokerConnection, topic: str, partition: int, n: int) -> tuple[int, int]:
    records = build_batch([(i, None, b"v") for i in range(n)])
    resp = conn.call(0, 9, {"acks": -1, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    p = resp.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def epoch_end(conn: BrokerConnection, topic: str, partition: int, current: int,
              epoch: int) -> tuple[int, int, int]:
    resp = conn.call(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)


def connect(broker: ServeProcess, client_id: str) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", broker.port, client_id=client_id, timeout_s=TIMEOUT_S)


def checkpoints(log_dir: Path) -> list[str]:
    return [(log_dir / f"big-{p}" / LEADER_EPOCH_CHECKPOINT_FILE).read_text()
            for p in range(PARTITIONS)]


def test_the_new_epochs_are_on_disk_when_the_leader_and_isr_is_answered(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    broker = ServeProcess(logs).start()
    try:
        conn = connect(broker, "controller")
        node = int(conn.call(3, 12, {"topics": []}).brokers[0].node_id)
        created = conn.call(19, 5, {"topics": [
            {"name": "big", "num_partitions": PARTITIONS, "replication_factor": 1,
             "assignments": [], "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        assert int(created.topics[0].error_code) == ErrorCode.NONE
        assert produce(conn, "big", 0, 3) == (ErrorCode.NONE, 0)  # epoch 0: offsets 0-2
        resp = conn.call(4, 7, leader_and_isr(node, "big", PARTITIONS, 1))
        errors = [int(p.error_code) for t in resp.topics for p in t.partition_errors]
        assert errors == [ErrorCode.NONE] * PARTITIONS
        assert produce(conn, "big", 0, 2) == (ErrorCode.NONE, 3)  # epoch 1: offsets 3-4
        assert produce(conn, "big", 5, 1) == (ErrorCode.NONE, 0)  # epoch 1: offset 0
        broker.kill()  # SIGKILL: no clean shutdown, nothing written after the acks
        conn.close()
        assert checkpoints(logs) == ["0\n2\n0 0\n1 3\n"] + ["0\n1\n1 0\n"] * (PARTITIONS - 1)

        broker.start()  # an unclean start: the logs are recovered
        conn = connect(broker, "client")
        assert epoch_end(conn, "big", 0, 1, 0) == (ErrorCode.NONE, 0, 3)
        assert epoch_end(conn, "big", 0, 1, 1) == (ErrorCode.NONE, 1, 5)
        assert epoch_end(conn, "big", 5, 1, 1) == (ErrorCode.NONE, 1, 1)
        # no record of any epoch: none kept, the partition led at epoch 0 (one-broker mode:
        # the epoch its log last saw)
        assert epoch_end(conn, "big", 1, 0, 0) == (ErrorCode.NONE, -1, -1)
        assert produce(conn, "big", 0, 1) == (ErrorCode.NONE, 5)
        conn.close()
        after = checkpoints(logs)
        assert (after[0], after[5]) == ("0\n2\n0 0\n1 3\n", "0\n1\n1 0\n")
        assert set(after[1:5] + after[6:]) == {"0\n0\n"}
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
