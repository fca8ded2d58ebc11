"""The ZooKeeper metadata store: cluster id, the topic mirror kept current by watches."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from controller_support import RecordingChannel, register, until

from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.metadata.admin import NewTopic
from tidelog.server.metadata.store import MetadataStoreError, TopicInfo
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.metadata_store import ZkAdminManager, ZkMetadataStore
from tidelog.server.zk.topic_admin import ZkTopicAdmin


def _wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_store_mirrors_zookeeper(zookeeper_connect: str, tmp_path: Path) -> None:
    zk, tool = KafkaZkClient(zookeeper_connect), KafkaZkClient(zookeeper_connect)
    zk.start()
    tool.start()
    try:
        store = ZkMetadataStore(zk, [tmp_path / "a"], node_id=1)
        assert store.load() is True
        assert len(store.cluster_id) == 22
        assert f"cluster.id={store.cluster_id}" in (tmp_path / "a" / "meta.properties").read_text()
        seen: list[str] = []
        store.listeners.append(seen.append)
        tid = uuid.uuid4()
        store.create_topic(TopicInfo("t", tid, 2, {"retention.ms": "5"}, {0: (1, 2), 1: (2, 1)}))
        assert store.topics["t"] == TopicInfo("t", tid, 2, {"retention.ms": "5"}, {0: (1, 2), 1: (2, 1)})
        assert store.topic_by_id(tid) is store.topics["t"]
        # another broker (or a tool) creates a topic, changes a config, grows a topic
        other = uuid.uuid4()
        tool.create_topic("u", other, {0: z.ReplicaAssignment((2,))}, {})
        _wait(lambda: "u" in store.topics, "u in the mirror")
        tool.set_or_create_entity_configs("topics", "t", {"retention.ms": "99"})
        _wait(lambda: store.topics["t"].configs == {"retention.ms": "99"}, "config change")
        got = tool.get_topic_assignment("u")
        assert got is not None
        tool.set_topic_assignment("u", other, {0: z.ReplicaAssignment((2,)), 1: z.ReplicaAssignment((1,))}, got[1])
        _wait(lambda: store.topics["u"].partitions == 2, "u grows")
        assert store.topics["u"].assignment == {0: (2,), 1: (1,)}
        store.update_topic(TopicInfo("t", tid, 3, {"retention.ms": "7"}, {2: (1, 2)}))
        assert tool.get_entity_configs("topics", "t") == {"retention.ms": "7"}
        assert store.topics["t"].partitions == 3 and store.topics["t"].assignment[2] == (1, 2)
        # deletion goes through the controller's znode; the topic's znodes going removes it
        store.delete_topic("u")
        assert tool.get_topic_deletions() == ["u"]
        tool.zk.delete("/brokers/topics/u", recursive=True)
        _wait(lambda: "u" not in store.topics, "u gone")
        assert "u" in seen and "t" in seen
        assert store.claim_producer_id_block(1000) == 0
        assert store.claim_producer_id_block(1000) == 1000
        # a log dir of another cluster is refused
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "meta.properties").write_text("cluster.id=someoneelse\nnode.id=1\nversion=1\n")
        with pytest.raises(MetadataStoreError, match="trying to join the wrong cluster"):
            ZkMetadataStore(zk, [tmp_path / "b"], node_id=1).load()
    finally:
        zk.close()
        tool.close()


def test_admin_manager_creates_through_zookeeper(zookeeper_connect: str, tmp_path: Path) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        others = [register(zookeeper_connect, b) for b in (2, 3)]
        controller = KafkaController(1, zk1, RecordingChannel, ControllerConfig(auto_leader_rebalance_enable=False))
        await controller.startup()
        await until(lambda: controller.is_active)
        store = ZkMetadataStore(others[0], [tmp_path], node_id=2)
        store.load()
        admin = ZkAdminManager(store, ZkTopicAdmin(others[0], default_replication_factor=3),
                               auto_create=True, internal_topics=frozenset({"__consumer_offsets"}))  # fmt: skip
        info = await admin.create_topic(NewTopic("a", 12, 3), timeout_ms=10_000)
        assert Counter(r[0] for r in info.assignment.values()) == {1: 4, 2: 4, 3: 4}
        await until(lambda: "a" in store.topics)
        assert store.topics["a"].topic_id == info.topic_id
        dry = await admin.create_topic(NewTopic("b", 2, 1), validate_only=True)
        assert dry.partitions == 2 and "b" not in zk1.get_all_topics()
        assert (await admin.auto_create("c")) is not None and "c" in zk1.get_all_topics()
        assert await admin.auto_create("__consumer_offsets") is None
        admin.alter_topic_configs("a", {"retention.ms": "10"})
        await until(lambda: store.topics["a"].configs == {"retention.ms": "10"})
        await admin.create_partitions("a", 13, timeout_ms=10_000)
        assert len(zk1.get_topic_assignment("a")[0].partitions) == 13  # type: ignore[index]
        deleted = await admin.delete_topic("a", timeout_ms=10_000)
        assert deleted.name == "a" and "a" not in zk1.get_all_topics()
        await controller.shutdown()
        for c in (zk1, *others):
            c.close()

    asyncio.run(main())
