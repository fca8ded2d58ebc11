"""The controller's requests on the wire: every inter-broker version encodes them, and the
broker's request decoder reads back what the controller decided."""

from __future__ import annotations

import uuid

import pytest

from tidelog.client.wire import encode_request
from tidelog.protocol.codec import decode_request
from tidelog.protocol.inter_broker import VERSIONS
from tidelog.server.controller.channel_manager import encode
from tidelog.server.controller.context import (
    LeaderAndIsrRequestData,
    PartitionStateInfo,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from tidelog.server.zk import data as z
from tidelog.util.topic_partition import TopicPartition

TID = uuid.uuid4()
TP = TopicPartition("t", 3)
STATE = z.LeaderIsrAndControllerEpoch(2, 7, (2, 1), 4, z.LEADER_RECOVERED, 11)
INFO = PartitionStateInfo(TP, TID, STATE, (1, 2, 3), is_new=True, offline_replicas=(3,))
B2 = z.BrokerRegistration(2, (z.EndPoint("INTERNAL", "h2", 9093, "SASL_SSL"),), rack="r2", epoch=99)


def _roundtrip(request: object, version: int) -> object:
    key, body = encode(request)  # type: ignore[arg-type]
    frame = encode_request(key, version, 5, "controller-1", body)
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version) == (key, version)
    return decoded


@pytest.mark.parametrize("version", range(VERSIONS[4][0], VERSIONS[4][1] + 1))
def test_leader_and_isr(version: int) -> None:
    r = _roundtrip(LeaderAndIsrRequestData(1, 4, 99, (INFO,), (B2,)), version)
    assert (r.controller_id, r.controller_epoch, r.broker_epoch) == (1, 4, 99)  # type: ignore[attr-defined]
    (topic,) = r.topic_states  # type: ignore[attr-defined]
    assert topic.topic_name == "t" and topic.topic_id == TID
    (p,) = topic.partition_states
    assert (p.partition_index, p.leader, p.leader_epoch, tuple(p.isr), p.partition_epoch) == (3, 2, 7, (2, 1), 11)
    assert tuple(p.replicas) == (1, 2, 3) and p.is_new
    (leader,) = r.live_leaders  # type: ignore[attr-defined]
    assert (leader.broker_id, leader.host_name, leader.port) == (2, "h2", 9093)


@pytest.mark.parametrize("version", range(VERSIONS[6][0], VERSIONS[6][1] + 1))
def test_update_metadata(version: int) -> None:
    r = _roundtrip(UpdateMetadataRequestData(1, 4, 99, (INFO,), (B2,)), version)
    (p,) = r.topic_states[0].partition_states  # type: ignore[attr-defined]
    assert (p.leader, p.zk_version, tuple(p.offline_replicas)) == (2, 11, (3,))
    (b,) = r.live_brokers  # type: ignore[attr-defined]
    assert b.id_ == 2 and b.rack == "r2"
    (ep,) = b.endpoints
    assert (ep.host, ep.port, ep.listener, ep.security_protocol) == ("h2", 9093, "INTERNAL", 3)


@pytest.mark.parametrize("version", range(VERSIONS[5][0], VERSIONS[5][1] + 1))
def test_stop_replica(version: int) -> None:
    r = _roundtrip(StopReplicaRequestData(1, 4, 99, {TP: (-2, True)}, {"t": TID}), version)
    (p,) = r.topic_states[0].partition_states  # type: ignore[attr-defined]
    assert (p.partition_index, p.leader_epoch, p.delete_partition) == (3, -2, True)
