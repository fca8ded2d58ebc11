"""Group configs are the cluster's (Kafka keeps them in its metadata; tidelog in ZooKeeper,
``/config/groups/<group>``): set through one broker, described by another, applied by the
group's coordinator wherever it is, and kept over that coordinator's restart."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import Wire

GROUP_RESOURCE = 32
GROUP = "sg-cluster-configs"
INTERVAL_MS = 1234  # not the broker's default (5000)


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    config = {"offsets.topic.num.partitions": 3}
    with EmbeddedCluster(brokers=3, config=config, zookeeper=zookeeper_server) as c:
        yield c


def alter(w: Wire, configs: list[tuple[str, int, str | None]]) -> Any:
    cls = request_class(44, 1)
    rcls = nested(cls, "resources")
    ccls = nested(rcls, "configs")
    return w.call(44, 1, validate_only=False, resources=(make(
        rcls, resource_type=GROUP_RESOURCE, resource_name=GROUP,
        configs=tuple(make(ccls, name=n, config_operation=op, value=v)
                      for n, op, v in configs)),))


def described(w: Wire) -> dict[str, tuple[str, int]]:
    rcls = nested(request_class(32, 4), "resources")
    resp: Any = w.call(32, 4, include_synonyms=False, include_documentation=False,
                       resources=(make(rcls, resource_type=GROUP_RESOURCE,
                                       resource_name=GROUP, configuration_keys=None),))
    [result] = resp.results
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, int(c.config_source)) for c in result.configs}


def coordinator(cluster: EmbeddedCluster) -> int:
    deadline = time.monotonic() + 60
    while True:
        with Wire(cluster.brokers[min(cluster.brokers)]) as w:
            found: Any = w.call(10, 6, key_type=0, coordinator_keys=(GROUP,))
        c = found.coordinators[0]
        if c.error_code == ErrorCode.NONE or time.monotonic() > deadline:
            assert c.error_code == ErrorCode.NONE
            return int(c.node_id)
        time.sleep(0.2)


def heartbeat_interval(cluster: EmbeddedCluster, broker_id: int, member: str) -> int:
    """A new share member's heartbeat interval, as the group's coordinator answers it."""
    deadline = time.monotonic() + 60
    while True:
        with Wire(cluster.brokers[broker_id]) as w:
            hb: Any = w.call(76, 1, group_id=GROUP, member_id=member, member_epoch=0,
                             rack_id=None, subscribed_topic_names=("any",))
        if hb.error_code == ErrorCode.NONE or time.monotonic() > deadline:
            assert hb.error_code == ErrorCode.NONE
            return int(hb.heartbeat_interval.total_seconds() * 1000) \
                if hasattr(hb.heartbeat_interval, "total_seconds") else int(hb.heartbeat_interval)
        time.sleep(0.2)  # loading the group's __consumer_offsets partition


def test_a_group_config_set_on_one_broker_is_applied_by_the_coordinator_on_another(
        cluster: EmbeddedCluster) -> None:
    coord = coordinator(cluster)
    other = next(b for b in cluster.brokers if b != coord)
    third = next(b for b in cluster.brokers if b not in (coord, other))
    with Wire(cluster.brokers[other]) as w:
        resp: Any = alter(w, [("share.heartbeat.interval.ms", 0, str(INTERVAL_MS)),
                              ("share.partition.max.record.locks", 0, "150")])
        assert [r.error_code for r in resp.responses] == [ErrorCode.NONE]
    assert cluster.zk.get_entity_configs("groups", GROUP) == {
        "share.heartbeat.interval.ms": str(INTERVAL_MS),
        "share.partition.max.record.locks": "150"}
    with Wire(cluster.brokers[third]) as w:  # a third broker describes it
        seen = described(w)
    assert seen["share.heartbeat.interval.ms"] == (str(INTERVAL_MS), 8)  # GROUP_CONFIG
    assert seen["share.partition.max.record.locks"] == ("150", 8)
    assert heartbeat_interval(cluster, coord, "m-1") == INTERVAL_MS
    cluster.restart(coord)
    new_coord = coordinator(cluster)
    assert heartbeat_interval(cluster, new_coord, "m-2") == INTERVAL_MS
    with Wire(cluster.brokers[coord]) as w:  # the restarted broker reads it back
        assert described(w)["share.heartbeat.interval.ms"] == (str(INTERVAL_MS), 8)
    with Wire(cluster.brokers[third]) as w:  # deleted through another broker: default again
        alter(w, [("share.heartbeat.interval.ms", 1, None)])
    assert cluster.zk.get_entity_configs("groups", GROUP) == {
        "share.partition.max.record.locks": "150"}
    deadline = time.monotonic() + 30
    with Wire(cluster.brokers[other]) as w:
        while described(w)["share.heartbeat.interval.ms"][1] != 5 and \
                time.monotonic() < deadline:  # the notification reaches it
            time.sleep(0.1)
        assert described(w)["share.heartbeat.interval.ms"] == ("5000", 5)  # DEFAULT_CONFIG
