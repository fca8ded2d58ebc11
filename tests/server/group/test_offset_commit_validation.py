"""OffsetCommit's validation as Kafka 4.x's OffsetMetadataManager.validateOffsetCommit and
the groups' own validateOffsetCommit, for every kind of group x member id x epoch:
no group, an empty classic group, an empty consumer group, groups with members, a share
group; member id empty, stale or current; epoch -1, stale or current."""

from __future__ import annotations

import pytest
from consumer_group_harness import Cluster, Member, coordinator, settle

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.coordinator import CommitEntry, GroupCoordinator
from tidelog.server.coordinator.group.share.coordinator import ShareHeartbeat
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

from .harness import Harness

TP = TopicPartition("t", 0)
E = ErrorCode


def commit(coord: GroupCoordinator, group: str, member: str, epoch: int,
           version: int = 9) -> ErrorCode:
    [err] = coord.commit_offsets(group, {TP: CommitEntry(1)}, member_id=member,
                                 generation_id=epoch, api_version=version).values()
    return err


@pytest.fixture
def coord() -> GroupCoordinator:
    cluster = Cluster()
    cluster.create("t", 2)
    return coordinator(InMemoryOffsetsStore(), cluster, ManualClock())


@pytest.mark.parametrize(("member", "epoch", "version", "code"), [
    ("", -1, 9, E.NONE),  # a simple group is made
    ("client-made-id", -1, 9, E.NONE),  # KIP-848 clients name a member id of their own
    ("", 3, 9, E.GROUP_ID_NOT_FOUND),
    ("m", 3, 9, E.GROUP_ID_NOT_FOUND),
    ("m", 3, 8, E.ILLEGAL_GENERATION),  # before v9, for old clients
])
def test_no_group(coord: GroupCoordinator, member: str, epoch: int, version: int,
                  code: ErrorCode) -> None:
    assert commit(coord, "new", member, epoch, version) == code
    assert ("new" in coord.groups) == (code == E.NONE)
    if code == E.NONE:  # and it is read back
        assert coord.fetch_offsets("new", [TP])[1][TP].offset == 1


@pytest.mark.parametrize(("member", "epoch", "code"), [
    ("", -1, E.NONE),
    ("stale", -1, E.NONE),  # no generation: any member id, while empty
    ("", 0, E.UNKNOWN_MEMBER_ID),
    ("stale", 1, E.UNKNOWN_MEMBER_ID),
])
def test_empty_classic_group(coord: GroupCoordinator, member: str, epoch: int,
                             code: ErrorCode) -> None:
    assert commit(coord, "simple", "", -1) == E.NONE
    assert commit(coord, "simple", member, epoch) == code


def test_classic_group_with_members() -> None:
    h = Harness()
    m1, _m2 = h.stable_group(2)
    c = h.coord
    assert commit(c, "g", "", -1) == E.UNKNOWN_MEMBER_ID
    assert commit(c, "g", "stale", -1) == E.UNKNOWN_MEMBER_ID
    assert commit(c, "g", m1, -1) == E.ILLEGAL_GENERATION
    assert commit(c, "g", "stale", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(c, "g", m1, 0) == E.ILLEGAL_GENERATION
    assert commit(c, "g", m1, 1) == E.NONE


def test_empty_consumer_group(coord: GroupCoordinator) -> None:
    a = Member(coord, "a", topics=("t",))
    settle([a])
    a.leave()
    assert coord.consumer.groups["g"].members == {}
    assert commit(coord, "g", "", -1) == E.NONE
    assert commit(coord, "g", "stale", -1) == E.NONE
    assert commit(coord, "g", "a", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(coord, "g", "", 1) == E.UNKNOWN_MEMBER_ID
    assert "g" not in coord.groups  # still the consumer group, no classic twin


def test_consumer_group_with_members(coord: GroupCoordinator) -> None:
    a = Member(coord, "a", topics=("t",))
    settle([a])
    assert commit(coord, "g", "", -1) == E.UNKNOWN_MEMBER_ID
    assert commit(coord, "g", "stale", -1) == E.UNKNOWN_MEMBER_ID
    assert commit(coord, "g", "a", -1) == E.STALE_MEMBER_EPOCH
    assert commit(coord, "g", "stale", a.epoch) == E.UNKNOWN_MEMBER_ID
    assert commit(coord, "g", "a", a.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit(coord, "g", "a", a.epoch) == E.NONE


def test_share_group_is_not_a_consumer_group(coord: GroupCoordinator) -> None:
    r = coord.share.heartbeat(ShareHeartbeat("sg", "s1", 0, ("t",)))
    assert r.error == E.NONE
    assert commit(coord, "sg", "", -1) == E.GROUP_ID_NOT_FOUND
    assert "sg" not in coord.groups
