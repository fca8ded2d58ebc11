"""Online migration's pieces sans I/O: a classic member's metadata in Kafka's
ConsumerGroupMemberMetadataValue (tagged field 0), the consumer protocol's subscription and
assignment, and the policy turning a classic group with members into a consumer group (or
refusing to)."""

from __future__ import annotations

import struct

import pytest
from consumer_group_harness import Cluster

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.coordinator import HeartbeatRequest
from tidelog.server.coordinator.group.consumer.migration import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from tidelog.server.coordinator.group.consumer.records import (
    ClassicMemberMetadata,
    MemberSubscription,
    decode_member_metadata,
    encode_member_metadata,
)
from tidelog.server.coordinator.group.coordinator import GroupCoordinator, JoinRequest
from tidelog.server.coordinator.group.member import JoinResult
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription_v3(topics: list[str], owned: dict[str, list[int]], rack: str) -> bytes:
    """A ConsumerProtocolSubscription v3 as a Java or librdkafka client writes it."""
    out = struct.pack(">hi", 3, len(topics)) + b"".join(_string(t) for t in topics)
    out += struct.pack(">i", -1) + struct.pack(">i", len(owned))
    for t, ps in owned.items():
        out += _string(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p)
                                                                 for p in ps)
    return out + struct.pack(">i", 7) + _string(rack)


def test_a_classic_members_metadata_round_trips_in_the_tagged_field() -> None:
    classic = ClassicMemberMetadata(10_000, (("range", b"\x00\x03abc"), ("roundrobin", b"")))
    sub = MemberSubscription("c", "/h", ("t",), None, 30_000, None, None, "r1", classic)
    data = encode_member_metadata(sub)
    assert decode_member_metadata(data) == sub
    plain = MemberSubscription("c", "/h", ("t",))
    assert decode_member_metadata(encode_member_metadata(plain)).classic is None
    assert len(encode_member_metadata(plain)) < len(data)


def test_the_consumer_protocol_codecs() -> None:
    sub = decode_subscription(subscription_v3(["b", "a"], {"a": [1, 2]}, "rack-1"))
    assert (sub.topics, sub.owned, sub.rack_id) == (("b", "a"), {"a": (1, 2)}, "rack-1")
    v0 = struct.pack(">hi", 0, 1) + _string("a") + struct.pack(">i", -1)
    assert decode_subscription(v0).owned == {}
    data = encode_assignment(3, {"a": [2, 0], "b": [1]})
    assert decode_assignment(data) == {"a": (0, 2), "b": (1,)}
    assert data[:2] == b"\x00\x03" and data.endswith(b"\xff\xff\xff\xff")  # null user data


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "upgrade"])
def test_the_policy_decides_whether_a_classic_group_with_members_upgrades(
        policy: str) -> None:
    clock = ManualClock()
    store = InMemoryOffsetsStore()
    coord = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1,
                                         group_initial_rebalance_delay_ms=0,
                                         group_consumer_migration_policy=policy),
                             clock=clock, scheduler=ManualScheduler(clock), store=store)
    coord.startup()
    cluster = Cluster()
    cluster.create("t", 2)
    coord.consumer.topics = cluster
    joined: list[JoinResult] = []
    coord.join_group(JoinRequest("g", "", "consumer",
                                 [("range", subscription_v3(["t"], {}, ""))], 10_000),
                     joined.append)
    assert joined and (joined[-1].error, joined[-1].generation_id) == (ErrorCode.NONE, 1)
    r = coord.consumer.heartbeat(HeartbeatRequest(
        "g", "new", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",), owned={}))
    if policy != "upgrade":
        assert r.error == ErrorCode.GROUP_ID_NOT_FOUND and "g" not in coord.consumer.groups
        return
    assert r.error == ErrorCode.NONE and "g" in coord.consumer.groups
    classic_id = joined[-1].member_id
    # a restart reads the classic member back from its ClassicMemberMetadata
    again = GroupCoordinator(coord.config, clock=clock, scheduler=ManualScheduler(clock),
                             store=store)
    again.startup()
    again.consumer.topics = cluster
    member = again.consumer.groups["g"].members[classic_id]
    assert member.subscription.classic is not None
    assert member.subscription.classic.session_timeout_ms == 10_000
    assert member.member_epoch == 1  # the classic generation
    assert again.heartbeat("g", classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert again.heartbeat("g", classic_id, 7) == ErrorCode.ILLEGAL_GENERATION
    # the consumer-protocol member leaves: "upgrade" alone does not downgrade
    left = again.consumer.heartbeat(HeartbeatRequest("g", "new", -1))
    assert left.error == ErrorCode.NONE and "g" in again.consumer.groups


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group() -> None:
    clock = ManualClock()
    store = InMemoryOffsetsStore()
    config = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)
    coord = GroupCoordinator(config, clock=clock, scheduler=ManualScheduler(clock),
                             store=store)
    coord.startup()
    cluster = Cluster()
    cluster.create("t", 2)
    coord.consumer.topics = cluster
    joined: list[JoinResult] = []
    coord.join_group(JoinRequest("g", "", "consumer",
                                 [("range", subscription_v3(["t"], {}, ""))], 10_000),
                     joined.append)
    classic_id = joined[-1].member_id
    assert coord.consumer.heartbeat(HeartbeatRequest(
        "g", "new", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",),
        owned={})).error == ErrorCode.NONE
    group = coord.consumer.groups["g"]
    assert group.group_epoch == 2  # the classic generation 1, then the new member
    # the classic member rejoins with nothing owned (an eager consumer revokes first)
    coord.join_group(JoinRequest("g", classic_id, "consumer",
                                 [("range", subscription_v3(["t"], {}, ""))], 10_000),
                     joined.append)
    assert (joined[-1].error, joined[-1].generation_id, joined[-1].leader_id) == (
        ErrorCode.NONE, 2, "")
    assert coord.consumer.heartbeat(HeartbeatRequest("g", "new", -1)).error == ErrorCode.NONE
    assert "g" not in coord.consumer.groups
    classic = coord.groups["g"]
    assert list(classic.members) == [classic_id]
    assert classic.state.value == "PreparingRebalance"  # the member rejoins as classic
    assert coord.heartbeat("g", classic_id, classic.generation_id) == \
        ErrorCode.REBALANCE_IN_PROGRESS
    again = GroupCoordinator(config, clock=clock, scheduler=ManualScheduler(clock),
                             store=store)
    again.startup()
    assert list(again.groups["g"].members) == [classic_id]
    assert "g" not in again.consumer.groups


def test_a_classic_member_that_does_not_rejoin_in_time_is_removed() -> None:
    clock = ManualClock()
    coord = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1,
                                         group_initial_rebalance_delay_ms=0),
                             clock=clock, scheduler=ManualScheduler(clock),
                             store=InMemoryOffsetsStore())
    coord.startup()
    cluster = Cluster()
    cluster.create("t", 2)
    coord.consumer.topics = cluster
    joined: list[JoinResult] = []
    coord.join_group(JoinRequest("g", "", "consumer",
                                 [("range", subscription_v3(["t"], {}, ""))], 60_000, 5_000),
                     joined.append)
    classic_id = joined[-1].member_id
    assert coord.consumer.heartbeat(HeartbeatRequest(
        "g", "new", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",),
        owned={})).error == ErrorCode.NONE
    assert coord.heartbeat("g", classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    clock.advance(4_000)
    assert coord.heartbeat("g", classic_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert classic_id in coord.consumer.groups["g"].members  # still within its timeout
    clock.advance(1_000)  # the rebalance timeout since it was first told, not rejoined
    group = coord.consumer.groups["g"]
    assert list(group.members) == ["new"]
    r = coord.consumer.heartbeat(HeartbeatRequest("g", "new", group.members["new"].member_epoch,
                                                  owned={}))
    assert r.error == ErrorCode.NONE
    assert sorted(p for ps in group.members["new"].assigned.values() for p in ps) == [0, 1]
