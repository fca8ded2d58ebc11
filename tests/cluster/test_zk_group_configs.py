"""The group configs' ZooKeeper store (``/config/groups/<group>``): a change made through
one broker reaches another by its change notification, and a store that has not had the
notification yet reads the group's configs as stored when asked to (``reread``: a
share-partition leader does before it picks where a new share-partition starts)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.group_configs import GROUP_CONFIGS_FILE
from tidelog.server.zk.change_notifications import ZkNodeChangeNotificationListener
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.group_configs import ZkGroupConfigStore
from tidelog.testing import EmbeddedBroker

GROUP = "orders/eu"  # a znode name only once sanitized


def _client(connect: str) -> KafkaZkClient:
    zk = KafkaZkClient(connect, session_timeout_ms=6000)
    zk.start()
    return zk


def test_a_change_through_one_store_reaches_another(zookeeper_connect: str) -> None:
    one, two = _client(zookeeper_connect), _client(zookeeper_connect)
    try:
        config = GroupConfig()
        writer = ZkGroupConfigStore(one, config)
        writer.watch(ZkNodeChangeNotificationListener(one), 0)
        follower = ZkGroupConfigStore(two, config)
        follower.watch(ZkNodeChangeNotificationListener(two), 0)
        unwatched = ZkGroupConfigStore(two, config)  # loaded once, no notifications
        unwatched.load()
        writer.alter(GROUP, [("share.auto.offset.reset", 0, "earliest")], False)
        assert one.get_entity_configs("groups", "orders%2Feu") == {
            "share.auto.offset.reset": "earliest"}
        deadline = time.monotonic() + 10
        while follower.get(GROUP, "share.auto.offset.reset") != "earliest" and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert follower.get(GROUP, "share.auto.offset.reset") == "earliest"
        assert unwatched.get(GROUP, "share.auto.offset.reset") == "latest"
        asyncio.run(unwatched.reread(GROUP))
        assert unwatched.get(GROUP, "share.auto.offset.reset") == "earliest"
        writer.alter(GROUP, [("share.auto.offset.reset", 1, None)], False)  # DELETE
        asyncio.run(unwatched.reread(GROUP))
        assert unwatched.get(GROUP, "share.auto.offset.reset") == "latest"
        assert unwatched.overrides == {}
    finally:
        one.close()
        two.close()


def test_a_one_broker_file_moves_into_zookeeper_once_as_the_broker_starts(
        zookeeper_connect: str, tmp_path: Path) -> None:
    """A broker that kept its group configs on its own (``group-configs.json``) and starts in
    a cluster moves them into ZooKeeper, where every broker follows them: each entry ZooKeeper
    does not hold (its own wins), announced; the file is renamed and not moved again."""
    with EmbeddedBroker({"offsets.topic.num.partitions": 1}, log_dir=tmp_path) as alone:
        admin = AdminClient({"bootstrap.servers": alone.bootstrap_servers})
        for group, name, value in ((GROUP, "share.auto.offset.reset", "earliest"),
                                   (GROUP, "share.record.lock.duration.ms", "15000"),
                                   ("kept", "share.isolation.level", "read_committed")):
            res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                name, value, incremental_operation=AlterConfigOpType.SET)])
            for f in admin.incremental_alter_configs([res]).values():
                f.result(10)
    stored = tmp_path / GROUP_CONFIGS_FILE
    assert json.loads(stored.read_text())[GROUP]["share.auto.offset.reset"] == "earliest"
    zk = _client(zookeeper_connect)
    try:
        zk.set_or_create_entity_configs("groups", "orders%2Feu", {
            "share.record.lock.duration.ms": "20000"})  # set in the cluster already: it wins
        follower = ZkGroupConfigStore(zk, GroupConfig())
        follower.watch(ZkNodeChangeNotificationListener(zk), 0)
        with EmbeddedBroker({"broker.id": "1", "zookeeper.connect": zookeeper_connect,
                             "offsets.topic.num.partitions": 1}, log_dir=tmp_path):
            assert zk.get_entity_configs("groups", "orders%2Feu") == {
                "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}
            assert zk.get_entity_configs("groups", "kept") == {
                "share.isolation.level": "read_committed"}
            deadline = time.monotonic() + 10  # announced: another broker's store follows
            while follower.get(GROUP, "share.auto.offset.reset") != "earliest" and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            assert follower.get(GROUP, "share.auto.offset.reset") == "earliest"
            assert follower.get("kept", "share.isolation.level") == "read_committed"
        assert not stored.exists()
        assert (tmp_path / f"{GROUP_CONFIGS_FILE}.migrated").exists()
        zk.set_or_create_entity_configs("groups", "kept", {})  # changed in the cluster since
        with EmbeddedBroker({"broker.id": "1", "zookeeper.connect": zookeeper_connect,
                             "offsets.topic.num.partitions": 1}, log_dir=tmp_path):
            assert zk.get_entity_configs("groups", "kept") == {}  # not moved again
    finally:
        zk.close()
