"""Share groups seen by the admin APIs on the wire: ShareGroupDescribe (77) for two
confluent-kafka ShareConsumers, ListGroups v5 by type, DescribeGroups and ConsumerGroupDescribe
refusing a share group, DeleteGroups once it is empty."""

from __future__ import annotations

import time
from typing import Any

from broker_wire import Wire
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedBroker


def test_share_groups_in_the_admin_apis() -> None:
    with EmbeddedBroker({"group.share.heartbeat.interval.ms": 250,
                         "offsets.topic.num.partitions": 3}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("shared", 2, 1)])["shared"].result(10)
        consumers = [ShareConsumer({"bootstrap.servers": b.bootstrap_servers,
                                    "group.id": "sg-admin"}) for _ in range(2)]
        for c in consumers:
            c.subscribe(["shared"])
        share = b.broker.group_coordinator.share
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(getattr(share.groups.get("sg-admin"),
                                                          "members", {})) < 2:
            for c in consumers:
                c.poll(0.05)
        with Wire(b) as w:
            d: Any = w.call(77, 1, group_ids=("sg-admin", "nobody"),
                            include_authorized_operations=False)
            group, missing = d.groups
            assert (group.error_code, group.group_state, len(group.members)) == (
                ErrorCode.NONE, "Stable", 2)
            for m in group.members:
                assert m.subscribed_topic_names == ("shared",)
                [tp] = m.assignment.topic_partitions
                assert (tp.topic_name, tp.partitions) == ("shared", (0, 1))  # both share both
            assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
            listed: Any = w.call(16, 5, states_filter=(), types_filter=("share",))
            assert [(g.group_id, g.group_type) for g in listed.groups] == [("sg-admin", "share")]
            classic: Any = w.call(15, 6, groups=("sg-admin",),
                                  include_authorized_operations=False)
            assert classic.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            kip848: Any = w.call(69, 1, group_ids=("sg-admin",),
                                 include_authorized_operations=False)
            assert kip848.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            busy: Any = w.call(42, 2, groups_names=("sg-admin",))
            assert busy.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
            for c in consumers:
                c.close()
            deleted: Any = w.call(42, 2, groups_names=("sg-admin",))
            assert deleted.results[0].error_code == ErrorCode.NONE
            assert "sg-admin" not in share.groups
