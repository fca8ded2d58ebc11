"""LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) sent to a real broker over the
wire, as a controller sends them: controller epochs are fenced (a request from an older
controller epoch than one already seen is STALE_CONTROLLER_EPOCH and changes nothing), and
UpdateMetadata's brokers and partitions become what Metadata answers."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedBroker

TOPIC_ID = uuid.UUID("6a4f1c52-0d1e-4b8a-9a5c-3f2e1d0c9b8a")


def update_metadata(epoch: int, port: int) -> dict[str, Any]:
    return {
        "controller_id": 0, "controller_epoch": epoch, "broker_epoch": -1,
        "topic_states": [{"topic_name": "elsewhere", "topic_id": TOPIC_ID, "partition_states": [
            {"partition_index": 0, "controller_epoch": epoch, "leader": 7, "leader_epoch": 3,
             "isr": [7, 8], "zk_version": 4, "replicas": [7, 8], "offline_replicas": []}]}],
        "live_brokers": [
            {"id_": 0, "endpoints": [{"port": port, "host": "127.0.0.1", "listener": "PLAINTEXT",
                                      "security_protocol": 0}], "rack": None},
            {"id_": 7, "endpoints": [{"port": 1, "host": "10.9.9.7", "listener": "PLAINTEXT",
                                      "security_protocol": 0}], "rack": "r7"},
        ],
    }  # fmt: skip


def test_controller_epochs_are_fenced(tidelog_broker: EmbeddedBroker) -> None:
    conn = BrokerConnection("127.0.0.1", tidelog_broker.port, client_id="controller", timeout_s=10)
    try:
        assert int(conn.call(6, 8, update_metadata(5, tidelog_broker.port)).error_code) == 0
        md = conn.call(3, 12, {"topics": [{"name": "elsewhere"}]})
        assert {int(b.node_id): b.host for b in md.brokers}[7] == "10.9.9.7"
        part = md.topics[0].partitions[0]
        assert (int(part.leader_id), int(part.leader_epoch)) == (7, 3)

        stale = conn.call(6, 7, update_metadata(4, tidelog_broker.port))
        assert int(stale.error_code) == ErrorCode.STALE_CONTROLLER_EPOCH

        lai = conn.call(4, 7, {
            "controller_id": 0, "controller_epoch": 4, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": "elsewhere", "topic_id": TOPIC_ID, "partition_states": [
                {"partition_index": 0, "controller_epoch": 4, "leader": 0, "leader_epoch": 9,
                 "isr": [0], "partition_epoch": 9, "replicas": [0]}]}],
            "live_leaders": [],
        })  # fmt: skip
        assert int(lai.error_code) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert [int(p.error_code) for p in lai.topics[0].partition_errors] == [
            ErrorCode.STALE_CONTROLLER_EPOCH
        ]
        stop = conn.call(5, 4, {
            "controller_id": 0, "controller_epoch": 3, "broker_epoch": -1,
            "topic_states": [{"topic_name": "elsewhere", "partition_states": [
                {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}],
        })  # fmt: skip
        assert int(stop.error_code) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert len(stop.partition_errors) == 0
        # nothing changed: the partition still has the state of controller epoch 5
        md = conn.call(3, 12, {"topics": [{"name": "elsewhere"}]})
        assert int(md.topics[0].partitions[0].leader_id) == 7
    finally:
        conn.close()
