"""KIP-392's replica choice (Kafka's RackAwareReplicaSelector and
ReplicaManager.findPreferredReadReplica) over a real leader Partition and its followers'
fetch state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.server.cluster.partition import Partition
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.metadata.image import BrokerInfo, MetadataImage
from tidelog.server.replication.replica_selector import (
    NO_PREFERRED_REPLICA,
    RACK_AWARE_REPLICA_SELECTOR,
    RackAwareReplicaSelector,
    ReplicaView,
    create_replica_selector,
    find_preferred_read_replica,
    preferred_read_replica,
)
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
RACKS = {1: "a", 2: "b", 3: "c", 4: "b"}


def test_rack_aware_selector_is_kafkas() -> None:
    s = RackAwareReplicaSelector()
    leader = ReplicaView(1, "a", 100, 0)
    b2 = ReplicaView(2, "b", 100, 50)
    b4 = ReplicaView(4, "b", 100, 10)
    c3 = ReplicaView(3, "c", 120, 0)
    everyone = [leader, b2, b4, c3]
    assert s.select(TP, None, everyone, leader) == leader  # no rack
    assert s.select(TP, "", everyone, leader) == leader
    assert s.select(TP, "z", everyone, leader) == leader  # nobody in that rack
    assert s.select(TP, "a", everyone, leader) == leader  # the leader is in it
    assert s.select(TP, "c", everyone, leader) == c3
    assert s.select(TP, "b", everyone, leader) == b4  # same end: caught up more recently
    assert s.select(TP, "b", [leader, b2, ReplicaView(4, "b", 90, 0)], leader) == b2  # larger end


def test_only_the_rack_aware_selector_is_known() -> None:
    assert create_replica_selector(None) is None
    assert isinstance(create_replica_selector(RACK_AWARE_REPLICA_SELECTOR), RackAwareReplicaSelector)
    with pytest.raises(ValueError):
        create_replica_selector("com.example.MySelector")


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Partition]:
    clock = ManualClock(1_000_000)
    lg = Log.open(tmp_path / "t-0", LogConfig.from_props({}), clock=clock)
    p = Partition(TP, lg, local_broker_id=1, clock=clock)
    p.make_leader(LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1, 2, 3, 4), 0, (1, 2, 3, 4)))
    yield p
    lg.close()


def _fetched(p: Partition, replica: int, offset: int) -> None:
    r = p.remote_replicas[replica]
    r.log_start_offset, r.log_end_offset = 0, offset
    r.last_caught_up_time_ms = p.clock.milliseconds()


def test_followers_in_the_isr_holding_the_offset_are_candidates(leader: Partition) -> None:
    s = RackAwareReplicaSelector()
    now = leader.clock.milliseconds()
    for b in (2, 3, 4):
        _fetched(leader, b, 0)
    assert find_preferred_read_replica(s, leader, "c", 0, now, RACKS) == 3
    assert find_preferred_read_replica(s, leader, "a", 0, now, RACKS) is None  # the leader
    # the fetch offset beyond a follower's end: not a candidate, so the leader
    assert find_preferred_read_replica(s, leader, "c", 5, now, RACKS) is None
    # not reachable on the client's listener (Kafka's Node.noNode()): not sent
    assert find_preferred_read_replica(s, leader, "c", 0, now, {1: "a", 2: "b"}) is None
    # out of the ISR: not a candidate
    leader.make_leader(LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1, 2, 4), 1, (1, 2, 3, 4)))
    assert find_preferred_read_replica(s, leader, "c", 0, now, RACKS) is None


def test_a_follower_does_not_pick(tmp_path: Path) -> None:
    clock = ManualClock(0)
    lg = Log.open(tmp_path / "t-0", LogConfig.from_props({}), clock=clock)
    p = Partition(TP, lg, local_broker_id=2, clock=clock)
    p.make_follower(LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1, 2, 3), 0, (1, 2, 3)))
    image = MetadataImage("c", 1, 1, {b: BrokerInfo(b, {"PLAINTEXT": ("h", 9000 + b)}, RACKS[b])
                                      for b in (1, 2, 3)}, {})  # fmt: skip
    assert preferred_read_replica(RACK_AWARE_REPLICA_SELECTOR, p, "a", 0, 0, image,
                                  "PLAINTEXT") == NO_PREFERRED_REPLICA  # fmt: skip
    lg.close()


def test_preferred_read_replica_reads_racks_and_listeners_from_the_image(leader: Partition) -> None:
    for b in (2, 3, 4):
        _fetched(leader, b, 0)
    brokers = {b: BrokerInfo(b, {"PLAINTEXT": ("h", 9000 + b)}, RACKS[b]) for b in (1, 2, 3)}
    brokers[4] = BrokerInfo(4, {"INTERNAL": ("h", 9104)}, "b")  # not on the client's listener
    image = MetadataImage("c", 1, 1, brokers, {})
    now = leader.clock.milliseconds()
    assert preferred_read_replica(RACK_AWARE_REPLICA_SELECTOR, leader, "b", 0, now, image,
                                  "PLAINTEXT") == 2  # fmt: skip
    assert preferred_read_replica(None, leader, "b", 0, now, image, "PLAINTEXT") == NO_PREFERRED_REPLICA
