"""Topic administration on ZooKeeper with a live controller (its brokers a recording channel)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter

import pytest
from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.errors import ApiError
from tidelog.server.zk import data as z
from tidelog.server.zk.topic_admin import ZkTopicAdmin

EXPECTED_TOPIC_KEYS = ["partitions", "removing_replicas", "topic_id", "adding_replicas", "version"]
EXPECTED_STATE_KEYS = ["controller_epoch", "leader", "version", "leader_epoch", "isr"]


async def _error(coro: object) -> tuple[ErrorCode, str | None]:
    with pytest.raises(ApiError) as e:
        await coro  # type: ignore[misc]
    return e.value.code, e.value.message


def test_create_topics_partitions_configs_and_delete(zookeeper_connect: str) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        others = [register(zookeeper_connect, b) for b in (2, 3)]
        controller = KafkaController(1, zk1, RecordingChannel, ControllerConfig(auto_leader_rebalance_enable=False))
        await controller.startup()
        await until(lambda: controller.is_active)
        admin = ZkTopicAdmin(others[0], default_replication_factor=3)
        plan = await admin.plan_topic("orders", 12, 3)
        assert Counter(r[0] for r in plan.values()) == {1: 4, 2: 4, 3: 4}
        assert all(sorted(r) == [1, 2, 3] for r in plan.values())
        tid = await admin.create_topic("orders", plan, {"cleanup.policy": "compact"}, timeout_ms=10_000)
        # the znodes read back are Kafka's JSON, key by key and in Kafka's order
        raw, _ = zk1.zk.get("/brokers/topics/orders")
        js = json.loads(raw)
        assert list(js) == EXPECTED_TOPIC_KEYS and js["version"] == 3
        assert js["topic_id"] == z.uuid_to_kafka(tid) and js["adding_replicas"] == {}
        assert {int(p): tuple(r) for p, r in js["partitions"].items()} == plan
        for p, replicas in plan.items():
            raw, stat = zk1.zk.get(f"/brokers/topics/orders/partitions/{p}/state")
            state = json.loads(raw)
            assert list(state) == EXPECTED_STATE_KEYS
            assert state == {"controller_epoch": 1, "leader": replicas[0], "version": 1,
                             "leader_epoch": 0, "isr": list(replicas)}  # fmt: skip
            assert stat.version == 0
        assert zk1.zk.get("/config/topics/orders")[0] == b'{"version":1,"config":{"cleanup.policy":"compact"}}'
        code, msg = await _error(admin.plan_topic("orders", 1, 1))
        assert code == ErrorCode.TOPIC_ALREADY_EXISTS and msg == "Topic 'orders' already exists."
        code, msg = await _error(admin.plan_topic("big", 1, 4))
        assert code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert msg == "Replication factor: 4 larger than available brokers: 3."
        assert (await _error(admin.plan_topic("x", 1, 1, {0: [9]})))[0] == ErrorCode.INVALID_REQUEST
        assert (await _error(admin.plan_topic("x", -1, -1, {0: [9]})))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert (await _error(admin.plan_topic("x", -1, -1, {0: [1, 1]})))[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert (await _error(admin.plan_topic("x", 0, 1)))[0] == ErrorCode.INVALID_PARTITIONS
        assert await admin.plan_topic("x", -1, -1, {0: [3, 1], 1: [1, 2]}) == {0: (3, 1), 1: (1, 2)}
        # more partitions: same replication factor, leaders elected
        await admin.create_partitions("orders", 14, timeout_ms=10_000)
        got = zk1.get_topic_assignment("orders")
        assert got is not None and sorted(got[0].partitions) == list(range(14))
        assert all(len(a.replicas) == 3 for a in got[0].partitions.values())
        assert (await _error(admin.create_partitions("orders", 14)))[0] == ErrorCode.INVALID_PARTITIONS
        # configs reach every broker through a change notification
        await admin.alter_topic_configs("orders", {"retention.ms": "1000"})
        assert await admin.topic_configs("orders") == {"retention.ms": "1000"}
        assert zk1.get_children("/config/changes") == ["config_change_0000000000"]
        await admin.delete_topic("orders", timeout_ms=10_000)
        assert zk1.get_all_topics() == []
        await controller.shutdown()
        for c in (zk1, *others):
            c.close()

    asyncio.run(main())


def test_internal_topic_waits_for_enough_brokers(zookeeper_connect: str) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        controller = KafkaController(1, zk1, RecordingChannel, ControllerConfig(auto_leader_rebalance_enable=False))
        await controller.startup()
        await until(lambda: controller.is_active)
        admin = ZkTopicAdmin(zk2)
        assert not await admin.internal_topic_ready("__consumer_offsets", 5, 3, {})
        assert zk1.get_all_topics() == []  # not created with two brokers alive
        zk3 = register(zookeeper_connect, 3)
        assert not await admin.internal_topic_ready("__consumer_offsets", 5, 3, {})  # created now
        await until(lambda: controller.context.leadership.keys() and len(controller.context.leadership) == 5)
        assert await admin.internal_topic_ready("__consumer_offsets", 5, 3, {})
        got = zk1.get_topic_assignment("__consumer_offsets")
        assert got is not None and all(len(a.replicas) == 3 for a in got[0].partitions.values())
        await controller.shutdown()
        for c in (zk1, zk2, zk3):
            c.close()

    asyncio.run(main())


def test_delete_waits_for_the_deleted_topic_not_for_its_name(zookeeper_connect: str) -> None:
    """A topic created again under the deleted one's name at once (a producer's
    auto-creation; librdkafka's 0184 with a producer running) is another topic: DeleteTopics
    answers once the topic of the deleted id is gone, not when the name is free."""
    zk = register(zookeeper_connect, 1)
    old, new = uuid.uuid4(), uuid.uuid4()
    zk.create_topic("again", old, {0: z.ReplicaAssignment((1,))}, {})

    def controller(event: object) -> None:  # deleted and created anew, no gap between
        zk.zk.set(z.topic_path("again"), z.encode_topic(new, {0: z.ReplicaAssignment((1,))}))
        zk.zk.delete(z.delete_topic_path("again"))

    try:
        zk.zk.exists(z.delete_topic_path("again"), watch=controller)
        asyncio.run(ZkTopicAdmin(zk, default_replication_factor=1).delete_topic(
            "again", timeout_ms=5_000))
        found = zk.get_topic_assignment("again")
        assert found is not None and found[0].topic_id == new
    finally:
        zk.close()
