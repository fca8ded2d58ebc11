"""The share coordinator APIs (83-87) on the wire, through the inter-broker client the
share-partition leaders use: InitializeShareGroupState, WriteShareGroupState merged into the
stored state, ReadShareGroupState fencing older leader epochs, ReadShareGroupStateSummary,
DeleteShareGroupState; ApiVersions advertises them; FindCoordinator with key type SHARE;
state survives a broker restart."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.share.persister import SHARE_STATE_API_RANGES
from tidelog.server.coordinator.record_codec import kafka_uuid
from tidelog.testing import EmbeddedBroker

GROUP = "sg-state"


def _partition(resp: Any) -> Any:
    [topic] = resp.results
    [p] = topic.partitions
    return p


async def _calls(host: str, port: int, topic_id: uuid.UUID) -> dict[str, Any]:
    conn = await AsyncBrokerConnection.connect(host, port, client_id="test-share-state",
                                               timeout_s=10, api_ranges=SHARE_STATE_API_RANGES)
    out: dict[str, Any] = {}

    async def call(key: int, part: dict[str, Any], tid: uuid.UUID = topic_id) -> Any:
        body = {"group_id": GROUP, "topics": [{"topic_id": tid, "partitions": [part]}]}
        return _partition(await conn.call(key, conn.version(key), body))

    try:
        out["versions"] = {k: conn.version(k) for k in range(83, 88)}
        out["empty"] = await call(84, {"partition": 0, "leader_epoch": 0})
        out["init"] = await call(83, {"partition": 0, "state_epoch": 1, "start_offset": 5})
        batch = {"first_offset": 5, "last_offset": 9, "delivery_state": 2, "delivery_count": 1}
        out["write"] = await call(85, {"partition": 0, "state_epoch": 1, "leader_epoch": 3,
                                       "start_offset": 5, "state_batches": [batch]})
        release = {"first_offset": 8, "last_offset": 12, "delivery_state": 0,
                   "delivery_count": 2}
        out["write2"] = await call(85, {"partition": 0, "state_epoch": 1, "leader_epoch": 3,
                                        "start_offset": -1, "state_batches": [release]})
        out["read"] = await call(84, {"partition": 0, "leader_epoch": 4})
        out["stale"] = await call(85, {"partition": 0, "state_epoch": 1, "leader_epoch": 3,
                                       "start_offset": 6, "state_batches": []})
        out["summary"] = await call(87, {"partition": 0, "leader_epoch": -1})
        out["unknown"] = await call(84, {"partition": 0, "leader_epoch": 0}, uuid.uuid4())
        out["other"] = await call(85, {"partition": 1, "state_epoch": 0, "leader_epoch": 0,
                                       "start_offset": 7, "state_batches": []})
        out["delete"] = await call(86, {"partition": 1})
        out["deleted"] = await call(87, {"partition": 1, "leader_epoch": -1})
        keys = [f"{GROUP}:{kafka_uuid(topic_id)}:0", "no-partition", "g:???:1"]
        found = await conn.call(10, 6, {"key_type": 2, "coordinator_keys": keys})
        out["find"] = [(c.key, c.error_code, c.port) for c in found.coordinators]
    finally:
        await conn.close()
    return out


async def _read_again(host: str, port: int, topic_id: uuid.UUID) -> Any:
    conn = await AsyncBrokerConnection.connect(host, port, client_id="test-share-state",
                                               timeout_s=10, api_ranges=SHARE_STATE_API_RANGES)
    try:
        body = {"group_id": GROUP, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "leader_epoch": 5}]}]}
        return _partition(await conn.call(84, 0, body))
    finally:
        await conn.close()


def test_share_coordinator_apis(tmp_path: Any) -> None:
    props = {"log.dirs": str(tmp_path / "logs"), "offsets.topic.num.partitions": 3,
             "share.coordinator.state.topic.num.partitions": 3}
    with EmbeddedBroker(props) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("q", 2, 1)])["q"].result(10)
        topic_id = b.broker.replica_manager.topic("q").topic_id
        host, port = b.bootstrap_servers.split(":")
        r = asyncio.run(_calls(host, int(port), topic_id))
    assert r["versions"] == {83: 0, 84: 0, 85: 1, 86: 0, 87: 1}
    assert (r["empty"].error_code, r["empty"].start_offset, r["empty"].state_epoch) == (
        ErrorCode.NONE, -1, 0)
    for name in ("init", "write", "write2", "delete"):
        assert r[name].error_code == ErrorCode.NONE, name
    read = r["read"]
    assert (read.error_code, read.state_epoch, read.start_offset) == (ErrorCode.NONE, 1, 5)
    assert [(s.first_offset, s.last_offset, s.delivery_state, s.delivery_count)
            for s in read.state_batches] == [(5, 7, 2, 1), (8, 12, 0, 2)]
    assert r["stale"].error_code == ErrorCode.FENCED_LEADER_EPOCH  # epoch 4 read since
    s = r["summary"]
    assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset) == (
        ErrorCode.NONE, 1, 3, 5)  # the stored state's (the reader's epoch is in memory)
    assert r["unknown"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert r["deleted"].start_offset == -1
    # FindCoordinator key type SHARE: the leader of the key's __share_group_state partition
    assert r["find"] == [(f"{GROUP}:{kafka_uuid(topic_id)}:0", ErrorCode.NONE, int(port)),
                         ("no-partition", ErrorCode.INVALID_REQUEST, -1),
                         ("g:???:1", ErrorCode.INVALID_REQUEST, -1)]
    with EmbeddedBroker(props) as again:  # the same log dirs: __share_group_state read back
        host, port = again.bootstrap_servers.split(":")
        back = asyncio.run(_read_again(host, int(port), topic_id))
    assert (back.error_code, back.start_offset, len(back.state_batches)) == (
        ErrorCode.NONE, 5, 2)
