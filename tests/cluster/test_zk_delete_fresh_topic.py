"""A topic just created on a ZooKeeper cluster: the broker's topic mirror follows ZooKeeper
through watches and may not have seen it yet. DeleteTopics must not answer
UNKNOWN_TOPIC_OR_PARTITION for a topic ZooKeeper has (kafka-python's
test_create_delete_topics met it on a three-broker cluster holding many topics, as its
test_end_to_end met it on produce), and a new topic must reach the mirror with a read of it
alone, not of every topic (the lag grew with the topic count)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.errors import ApiError
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.metadata_store import ZkAdminManager, ZkMetadataStore
from tidelog.server.zk.topic_admin import ZkTopicAdmin


def test_delete_of_a_topic_the_mirror_has_not_seen_yet(zookeeper_connect: str,
                                                        tmp_path: Path) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        controller = KafkaController(1, zk1, RecordingChannel,
                                     ControllerConfig(auto_leader_rebalance_enable=False))
        await controller.startup()
        await until(lambda: controller.is_active)
        try:
            admin = ZkTopicAdmin(zk2, default_replication_factor=2)
            tid = await admin.create_topic("fresh", await admin.plan_topic("fresh", 2, 2), {},
                                           timeout_ms=10_000)
            # a mirror whose watch has not fired yet: it has read nothing of ZooKeeper
            store = ZkMetadataStore(zk2, [tmp_path], 2)
            manager = ZkAdminManager(store, admin, auto_create=False,
                                     internal_topics=frozenset())
            assert "fresh" not in store.topics
            info = await manager.delete_topic("fresh", timeout_ms=10_000)
            assert (info.name, info.topic_id, info.partitions) == ("fresh", tid, 2)
            assert zk1.get_all_topics() == []
            with pytest.raises(ApiError) as e:
                await manager.delete_topic("never-created", timeout_ms=1_000)
            assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            await controller.shutdown()
            zk1.close()
            zk2.close()

    asyncio.run(main())


def _wait(cond: object, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_new_topic_reaches_the_mirror_with_a_read_of_it_alone(zookeeper_connect: str,
                                                                  tmp_path: Path) -> None:
    writer = KafkaZkClient(zookeeper_connect)
    reader = KafkaZkClient(zookeeper_connect)
    writer.start()
    reader.start()
    try:
        one = {0: z.ReplicaAssignment((1,))}
        for i in range(20):
            writer.create_topic(f"old-{i}", uuid.uuid4(), one, {})
        store = ZkMetadataStore(reader, [tmp_path], 1)
        store.load()
        assert sorted(store.topics) == sorted(f"old-{i}" for i in range(20))
        reads: list[str] = []
        read_assignment = reader.get_topic_assignment

        def counting(topic: str, watch: object = None) -> object:
            reads.append(topic)
            return read_assignment(topic, watch)  # type: ignore[arg-type]

        reader.get_topic_assignment = counting  # type: ignore[method-assign]
        new_id = uuid.uuid4()
        writer.create_topic("new", new_id, one, {})
        _wait(lambda: "new" in store.topics, "the new topic in the mirror")
        assert reads == ["new"] and store.topics["new"].topic_id == new_id
        # a known topic still follows ZooKeeper through its own watch
        writer.set_topic_assignment("old-3", store.topics["old-3"].topic_id,
                                    {0: z.ReplicaAssignment((1,)), 1: z.ReplicaAssignment((1,))},
                                    -1)
        _wait(lambda: store.topics["old-3"].partitions == 2, "old-3's second partition")
        assert len(store.topics) == 21
    finally:
        writer.close()
        reader.close()
