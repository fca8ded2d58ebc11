"""Requests a controller and clients send about a topic's leader epochs, over the wire:
what the tests of a failover's leader-epoch checkpoints share."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.client.conn import BrokerConnection
from tidelog.records import build_batch


def leader_and_isr_at(node: int, topic: str, n: int, epoch: int) -> dict[str, Any]:
    """A LeaderAndIsr making ``node`` the leader of the topic's ``n`` partitions (hosted
    already) at ``epoch``; no topic id: the broker's own stays."""
    parts = [{"partition_index": p, "controller_epoch": 1, "leader": node,
              "leader_epoch": epoch, "isr": [node], "partition_epoch": epoch,
              "replicas": [node], "is_new": False}
             for p in range(n)]  # fmt: skip
    return {"controller_id": node, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": uuid.UUID(int=0),
                              "partition_states": parts}], "live_leaders": []}  # fmt: skip


def lai_errors(resp: Any) -> list[int]:
    return [int(p.error_code) for t in resp.topics for p in t.partition_errors]


def create_topic(conn: BrokerConnection, topic: str, n: int) -> int:
    created = conn.call(19, 5, {"topics": [
        {"name": topic, "num_partitions": n, "replication_factor": 1, "assignments": [],
         "configs": []}], "timeout_ms": 60_000, "validate_only": False})
    return int(created.topics[0].error_code)


def produce_records(conn: BrokerConnection, topic: str, partition: int, n: int = 1,
            acks: int = 1) -> tuple[int, int]:
    """(error, base offset) of a produce of ``n`` records in one batch."""
    records = build_batch([(i, None, b"v") for i in range(n)])
    resp = conn.call(0, 9, {"acks": acks, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    p = resp.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def epoch_end(conn: BrokerConnection, topic: str, partition: int, current: int,
              epoch: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch as a consumer asks it: (error, epoch, end offset)."""
    resp = conn.call(23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)
