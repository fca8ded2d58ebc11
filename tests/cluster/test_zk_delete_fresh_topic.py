"""DeleteTopics right after CreateTopics on a ZooKeeper cluster: the broker's topic mirror
follows ZooKeeper through a watch and may not have seen the topic yet; the delete must not
answer UNKNOWN_TOPIC_OR_PARTITION for a topic ZooKeeper has (kafka-python's
test_create_delete_topics met it on a three-broker cluster holding many topics)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.errors import ApiError
from tidelog.server.metadata.zk_admin import ZkTopicAdmin
from tidelog.server.metadata.zk_store import ZkAdminManager, ZkMetadataStore


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
