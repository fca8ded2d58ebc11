"""Faults on demand in the cluster fixture: one ``tidelog.fault.plan.file`` setting with
``{broker.id}`` gives each broker process its own plan file; a fault armed on the partition
leader's file fires there, and the producer's retries carry the record through, once."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.errors import ErrorCode
from tidelog.server.fault_file import FAULT_PLAN_FILE, FaultPlanFile
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition


def _leader(cluster: EmbeddedCluster, tp: TopicPartition) -> int:
    deadline = time.monotonic() + 30
    while True:
        state = cluster.zk.get_topic_partition_states([tp]).get(tp)
        if state is not None and state.leader > 0:
            return int(state.leader)
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.05)


def test_a_fault_armed_on_the_leader_fires_there(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    config = {FAULT_PLAN_FILE: str(tmp_path / "faults-{broker.id}.jsonl")}
    with EmbeddedCluster(brokers=3, config=config, zookeeper=zookeeper_server) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(30)
        leader = _leader(cluster, TopicPartition("orders", 0))
        plan = FaultPlanFile(tmp_path / f"faults-{leader}.jsonl")
        plan.fail_produce("orders", 0, ErrorCode.NOT_ENOUGH_REPLICAS, times=3)

        errors: list[object] = []
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                      "enable.idempotence": True, "retry.backoff.ms": 20})  # fmt: skip
        p.produce("orders", b"once", on_delivery=lambda err, _m: errors.append(err))
        assert p.flush(60) == 0 and errors == [None], errors
        assert [f.detail for f in plan.injected] == ["orders-0: NOT_ENOUGH_REPLICAS"] * 3
        others = [FaultPlanFile(tmp_path / f"faults-{b}.jsonl") for b in (1, 2, 3) if b != leader]
        assert all(o.injected == [] for o in others)

        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check",
                      "auto.offset.reset": "earliest"})  # fmt: skip
        try:
            c.assign([CkTopicPartition("orders", 0, 0)])
            got = [m.value() for m in c.consume(10, 10) if m.error() is None]
        finally:
            c.close()
        assert got == [b"once"]
