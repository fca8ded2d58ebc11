"""The group configs' ZooKeeper store (``/config/groups/<group>``): a change made through
one broker reaches another by its change notification, and a store that has not had the
notification yet reads the group's configs as stored when asked to (``reread``: a
share-partition leader does before it picks where a new share-partition starts)."""

from __future__ import annotations

import asyncio
import time

from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.zk.change_notifications import ZkNodeChangeNotificationListener
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.group_configs import ZkGroupConfigStore

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
