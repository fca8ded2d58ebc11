"""KIP-848 consumer groups in the coordinator, on a manual clock: epochs, the uniform and range
assignors through heartbeats, revoke-before-reassign, session and rebalance timeouts, member
epochs on offset commits and fetches, and a restart that reloads everything from the log."""

from __future__ import annotations

import pytest
from consumer_group_harness import (
    REBALANCE_MS,
    SESSION_MS,
    Cluster,
    Member,
    coordinator,
    owners,
    settle,
)

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.consumer.coordinator import HeartbeatRequest
from tidelog.server.coordinator.group.consumer.group import ConsumerGroupState, MemberState
from tidelog.server.coordinator.group.coordinator import CommitEntry, GroupCoordinator
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.server.errors import ApiError
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition


@pytest.fixture
def env() -> tuple[GroupCoordinator, Cluster, ManualClock, InMemoryOffsetsStore]:
    cluster, clock, store = Cluster(), ManualClock(), InMemoryOffsetsStore()
    cluster.create("t", 6)
    return coordinator(store, cluster, clock), cluster, clock, store


Env = tuple[GroupCoordinator, Cluster, ManualClock, InMemoryOffsetsStore]


def test_three_members_on_six_partitions_get_two_each(env: Env) -> None:
    coord = env[0]
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(3)]
    settle(members)
    assert sorted(len(m.partitions()) for m in members) == [2, 2, 2]
    assert all(len(o) == 1 for o in owners(members).values()) and len(owners(members)) == 6
    group = coord.consumer.groups["g"]
    assert group.state() is ConsumerGroupState.STABLE
    assert group.group_epoch == group.assignment_epoch == 3  # one bump per joining member
    assert {m.epoch for m in members} == {3}


def test_fourth_member_takes_partitions_only_after_their_owner_revoked_them(env: Env) -> None:
    coord = env[0]
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(3)]
    settle(members)
    before = {m.member_id: m.partitions() for m in members}
    seen = {m.member_id: len(m.history) for m in members}
    new = Member(coord, "m3", topics=("t",))
    new.heartbeat()
    assert new.partitions() == set()  # everything is still owned by the others
    steps = [*members, new]
    for _ in range(6):
        for m in steps:
            m.heartbeat()
            assert all(len(o) == 1 for o in owners(steps).values())  # never two owners
    assert sorted(len(m.partitions()) for m in steps) == [1, 1, 2, 2]
    for m in members:  # a member only ever lost partitions; what it keeps it held throughout
        kept = m.partitions()
        assert kept <= before[m.member_id]
        for h in m.history[seen[m.member_id]:]:
            assert kept <= {(t, p) for t, ps in h.items() for p in ps}
    moved = sum(len(before[m.member_id] - m.partitions()) for m in members)
    assert moved == 1  # sticky: only what the newcomer needs moves


def test_a_member_keeping_a_revoked_partition_holds_it_back(env: Env) -> None:
    coord = env[0]
    a, b = Member(coord, "a", topics=("t",)), Member(coord, "b", topics=("t",))
    settle([a])
    b.heartbeat()
    r = coord.consumer.heartbeat(HeartbeatRequest("g", "a", a.epoch, owned=a.owned))
    # a is asked to revoke half; while it still reports them owned, b gets none of them
    assert r.assignment is not None and sum(len(p) for p in r.assignment.values()) == 3
    assert coord.consumer.groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert b.heartbeat().error == ErrorCode.NONE and b.partitions() == set()
    assert coord.consumer.groups["g"].members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a.owned = dict(r.assignment)  # now a lets go
    a.heartbeat()
    b.heartbeat()
    assert len(b.partitions()) == 3 and not (a.partitions() & b.partitions())


def test_a_member_that_stops_heartbeating_is_fenced_after_the_session_timeout(env: Env) -> None:
    coord, _, clock, _ = env
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(3)]
    settle(members)
    alive, dead = members[:2], members[2]
    for _ in range(4):  # the others keep heartbeating every 5 s; the dead one does not
        clock.advance(SESSION_MS // 4 - 1)
        for m in alive:
            m.heartbeat()
    assert "m2" in coord.consumer.groups["g"].members
    clock.advance(10)
    assert "m2" not in coord.consumer.groups["g"].members
    settle(alive)
    assert sorted(len(m.partitions()) for m in alive) == [3, 3]
    assert dead.heartbeat().error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_time_is_fenced(env: Env) -> None:
    coord, _, clock, _ = env
    a, b = Member(coord, "a", topics=("t",)), Member(coord, "b", topics=("t",))
    settle([a])
    b.heartbeat()
    stuck = dict(a.owned)
    r = coord.consumer.heartbeat(HeartbeatRequest("g", "a", a.epoch, owned=stuck))
    assert r.error == ErrorCode.NONE
    clock.advance(REBALANCE_MS - 1)
    coord.consumer.heartbeat(HeartbeatRequest("g", "a", a.epoch, owned=stuck))
    assert "a" in coord.consumer.groups["g"].members
    clock.advance(1)
    assert "a" not in coord.consumer.groups["g"].members
    settle([b])
    assert len(b.partitions()) == 6


def test_member_epochs_are_checked(env: Env) -> None:
    coord = env[0]
    a = Member(coord, "a", topics=("t",))
    settle([a])
    ahead = coord.consumer.heartbeat(HeartbeatRequest("g", "a", a.epoch + 1, owned=a.owned))
    assert ahead.error == ErrorCode.FENCED_MEMBER_EPOCH
    stranger = coord.consumer.heartbeat(HeartbeatRequest("g", "x", 1, owned={}))
    assert stranger.error == ErrorCode.UNKNOWN_MEMBER_ID
    b, c = Member(coord, "b", topics=("t",)), Member(coord, "c", topics=("t",))
    settle([a, b])
    settle([a, b, c])
    assert a.epoch == 3
    # the answer that bumped a's epoch may be lost: a retries with its previous epoch
    group_member = coord.consumer.groups["g"].members["a"]
    retry = coord.consumer.heartbeat(HeartbeatRequest(
        "g", "a", group_member.previous_member_epoch, owned=a.owned))
    assert retry.error == ErrorCode.NONE and retry.member_epoch == a.epoch
    older = coord.consumer.heartbeat(HeartbeatRequest("g", "a", 1, owned=a.owned))
    assert older.error == ErrorCode.FENCED_MEMBER_EPOCH


@pytest.mark.parametrize(("req", "code"), [
    (HeartbeatRequest("", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                      owned={}), ErrorCode.INVALID_REQUEST),
    (HeartbeatRequest("g", "m", 0, subscribed_topic_names=("t",), owned={}),
     ErrorCode.INVALID_REQUEST),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, owned={}), ErrorCode.INVALID_REQUEST),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",),
                      server_assignor="sticky", owned={}), ErrorCode.UNSUPPORTED_ASSIGNOR),
    (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(",
                      owned={}), ErrorCode.INVALID_REGULAR_EXPRESSION),
])
def test_invalid_heartbeats(env: Env, req: HeartbeatRequest, code: ErrorCode) -> None:
    assert env[0].consumer.heartbeat(req).error == code
    assert "g" not in env[0].consumer.groups


def test_the_range_assignor_when_members_ask_for_it(env: Env) -> None:
    coord, cluster, _, _ = env
    tid = cluster.topics["t"].topic_id
    members = [Member(coord, f"m{i}", topics=("t",), assignor="range") for i in range(4)]
    settle(members)
    assert [sorted(m.owned.get(tid, ())) for m in members] == [[0, 1], [2, 3], [4], [5]]


def test_a_regex_subscription_picks_up_a_topic_created_later(env: Env) -> None:
    coord, cluster, _, _ = env
    a = Member(coord, "a", regex="re-.*")
    cluster.create("re-1", 2)
    cluster.create("other", 2)
    settle([a])
    names = {t.topic_id: t.name for t in cluster.topics.values()}
    assert {names[t] for t in a.owned} == {"re-1"}
    epoch = coord.consumer.groups["g"].group_epoch
    cluster.create("re-2", 3)
    settle([a])
    names = {t.topic_id: t.name for t in cluster.topics.values()}
    assert {names[t] for t in a.owned} == {"re-1", "re-2"}
    assert len(a.partitions()) == 5
    assert coord.consumer.groups["g"].group_epoch == epoch + 1


def test_offsets_are_committed_and_fetched_with_member_epochs(env: Env) -> None:
    coord = env[0]
    a = Member(coord, "a", topics=("t",))
    settle([a])
    tp = TopicPartition("t", 0)
    ok = coord.commit_offsets("g", {tp: CommitEntry(42)}, member_id="a", generation_id=a.epoch)
    assert ok == {tp: ErrorCode.NONE}
    stale = coord.commit_offsets("g", {tp: CommitEntry(43)}, member_id="a",
                                 generation_id=a.epoch - 1)
    assert stale == {tp: ErrorCode.STALE_MEMBER_EPOCH}
    assert coord.commit_offsets("g", {tp: CommitEntry(43)}, member_id="zz",
                                generation_id=a.epoch) == {tp: ErrorCode.UNKNOWN_MEMBER_ID}
    # an admin (no member) may only commit to an empty group
    assert coord.commit_offsets("g", {tp: CommitEntry(43)}) == {tp: ErrorCode.UNKNOWN_MEMBER_ID}
    err, got = coord.fetch_offsets("g", [tp], "a", a.epoch)
    assert err == ErrorCode.NONE and got[tp].offset == 42
    assert coord.fetch_offsets("g", [tp], "a", a.epoch + 1)[0] == ErrorCode.STALE_MEMBER_EPOCH
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 42  # admin tools fetch freely
    assert "g" not in coord.groups  # no classic group was made on the side
    a.leave()
    assert coord.commit_offsets("g", {tp: CommitEntry(7)}) == {tp: ErrorCode.NONE}


def test_a_restart_reloads_groups_members_assignments_and_offsets(env: Env) -> None:
    coord, cluster, clock, store = env
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(3)]
    settle(members)
    tp = TopicPartition("t", 3)
    coord.commit_offsets("g", {tp: CommitEntry(99)}, member_id="m0", generation_id=3)
    before = coord.consumer.groups["g"]
    coord.shutdown()
    again = coordinator(store, cluster, clock)
    group = again.consumer.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (before.group_epoch,
                                                           before.assignment_epoch)
    assert group.target == before.target and group.subscription_metadata == \
        before.subscription_metadata
    for m in members:
        loaded = group.members[m.member_id]
        assert (loaded.member_epoch, loaded.assigned) == (m.epoch, m.owned)
        assert loaded.subscription.subscribed_topic_names == ("t",)
    assert again.fetch_offsets("g", [tp])[1][tp].offset == 99
    for m in members:  # the members carry on where they were, no rebalance
        m.coord = again
    settle(members)
    assert group.group_epoch == 3
    # and the reloaded members still need to heartbeat
    clock.advance(SESSION_MS)
    assert again.consumer.groups["g"].members == {}


def test_list_describe_and_delete_tell_the_group_types_apart(env: Env) -> None:
    coord = env[0]
    a = Member(coord, "a", topics=("t",))
    settle([a])
    coord.commit_offsets("classic-g", {TopicPartition("t", 0): CommitEntry(1)})
    _, groups = coord.list_groups()
    assert [(g.group_id, g.group_type, g.state) for g in groups] == [
        ("classic-g", "classic", "Empty"), ("g", "consumer", "Stable")]
    assert [g.group_id for g in coord.list_groups(types=["consumer"])[1]] == ["g"]
    assert coord.describe_group("g").error == ErrorCode.GROUP_ID_NOT_FOUND
    assert coord.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}
    a.leave()
    assert coord.delete_groups(["g"]) == {"g": ErrorCode.NONE}
    assert "g" not in coord.consumer.groups


def test_an_empty_classic_group_is_upgraded_keeping_its_offsets(env: Env) -> None:
    coord, cluster, clock, store = env
    tp = TopicPartition("t", 1)
    coord.commit_offsets("g", {tp: CommitEntry(5)})
    assert "g" in coord.groups
    a = Member(coord, "a", topics=("t",))
    settle([a])
    assert "g" not in coord.groups and "g" in coord.consumer.groups
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 5
    again = coordinator(store, cluster, clock)
    assert "g" not in again.groups and again.fetch_offsets("g", [tp])[1][tp].offset == 5


def test_an_empty_consumer_groups_offsets_expire_and_then_the_group(env: Env) -> None:
    _, cluster, clock, _ = env
    store = InMemoryOffsetsStore()
    coord = coordinator(store, cluster, clock, offsets_retention_minutes=1,
                        offsets_retention_check_interval_ms=1000)
    a = Member(coord, "a", topics=("t",))
    settle([a])
    tp = TopicPartition("t", 0)
    coord.commit_offsets("g", {tp: CommitEntry(8)}, member_id="a", generation_id=a.epoch)
    for _ in range(8):  # a member keeps the group's offsets however old they get
        clock.advance(10_000)
        a.heartbeat()
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 8
    a.leave()
    clock.advance(1000)
    assert "g" not in coord.consumer.groups
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == -1
    assert "g" not in coordinator(store, cluster, clock).consumer.groups


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance(env: Env) -> None:
    coord, _, clock, _ = env
    a = Member(coord, "a1", topics=("t",), instance_id="host-a")
    b = Member(coord, "b", topics=("t",))
    settle([a, b])
    held, epoch = a.partitions(), coord.consumer.groups["g"].group_epoch
    a_epoch, a_owned = a.epoch, dict(a.owned)
    twin = Member(coord, "a2", topics=("t",), instance_id="host-a")
    assert twin.heartbeat().error == ErrorCode.UNRELEASED_INSTANCE_ID  # a1 is still there
    assert a.leave(static=True).member_epoch == -2
    settle([b])
    assert len(b.partitions()) == 3  # a's partitions wait for it
    clock.advance(SESSION_MS // 2)
    b.heartbeat()
    again = Member(coord, "a2", topics=("t",), instance_id="host-a")
    settle([again, b])
    group = coord.consumer.groups["g"]
    assert again.partitions() == held and group.group_epoch == epoch
    assert set(group.members) == {"a2", "b"}
    old = coord.consumer.heartbeat(HeartbeatRequest("g", "a1", a_epoch, instance_id="host-a",
                                                    owned=a_owned))
    assert old.error == ErrorCode.FENCED_INSTANCE_ID


def test_a_static_member_that_never_returns_is_fenced_after_its_session(env: Env) -> None:
    coord, _, clock, _ = env
    a = Member(coord, "a1", topics=("t",), instance_id="host-a")
    b = Member(coord, "b", topics=("t",))
    settle([a, b])
    a.leave(static=True)
    for _ in range(4):
        clock.advance(SESSION_MS // 4)
        b.heartbeat()
    settle([b])
    assert "a1" not in coord.consumer.groups["g"].members and len(b.partitions()) == 6


def test_group_configs_override_the_session_and_heartbeat_of_one_group(env: Env) -> None:
    coord, _, clock, _ = env
    coord.group_configs.alter("fast", [("consumer.session.timeout.ms", 0, "10000"),
                                       ("consumer.heartbeat.interval.ms", 0, "1000")], False)
    fast = Member(coord, "f", group_id="fast", topics=("t",))
    slow = Member(coord, "s", topics=("t",))
    assert fast.heartbeat().heartbeat_interval_ms == 1000
    assert slow.heartbeat().heartbeat_interval_ms == 5000
    clock.advance(10_000)
    assert "f" not in coord.consumer.groups["fast"].members
    assert "s" in coord.consumer.groups["g"].members
    with pytest.raises(ApiError):
        coord.group_configs.alter("fast", [("consumer.session.timeout.ms", 0, "61000")], False)
    with pytest.raises(ApiError):
        coord.group_configs.alter("fast", [("no.such.config", 0, "1")], False)


def test_the_group_size_limit_and_offset_delete(env: Env) -> None:
    _, cluster, clock, _ = env
    cluster.create("other", 1)
    coord = coordinator(InMemoryOffsetsStore(), cluster, clock, group_consumer_max_size=2)
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(3)]
    settle(members[:2])
    assert members[2].heartbeat().error == ErrorCode.GROUP_MAX_SIZE_REACHED
    tp, gone = TopicPartition("t", 0), TopicPartition("other", 0)
    coord.commit_offsets("g", {tp: CommitEntry(1), gone: CommitEntry(2)}, member_id="m0",
                         generation_id=members[0].epoch)
    err, per = coord.delete_offsets("g", [tp, gone])
    assert err == ErrorCode.NONE
    assert per == {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, gone: ErrorCode.NONE}
    assert coord.fetch_offsets("g", [tp, gone])[1][gone].offset == -1


def test_a_v0_member_gets_its_id_from_the_coordinator(env: Env) -> None:
    coord = env[0]
    r = coord.consumer.heartbeat(HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1000,
                                                  subscribed_topic_names=("t",), owned={}))
    assert r.error == ErrorCode.NONE and len(r.member_id) == 22  # Kafka's base64 Uuid
    assert r.member_id in coord.consumer.groups["g"].members
    assert coord.consumer.heartbeat(HeartbeatRequest("g", "", 1, owned={})).error == \
        ErrorCode.INVALID_REQUEST


def test_added_partitions_are_assigned_without_anyone_rejoining(env: Env) -> None:
    coord, cluster, _, _ = env
    members = [Member(coord, f"m{i}", topics=("t",)) for i in range(2)]
    settle(members)
    old = cluster.topics["t"]
    cluster.topics["t"] = type(old)(old.topic_id, "t", 10)  # CreatePartitions: 6 -> 10
    settle(members)
    assert sorted(len(m.partitions()) for m in members) == [5, 5]
    assert len(owners(members)) == 10


def test_a_new_regex_is_resolved_after_the_heartbeat_that_brings_it(env: Env) -> None:
    coord, cluster = env[0], env[1]
    cluster.create("re-1", 2)
    lit = cluster.topics["t"].topic_id
    a = Member(coord, "a", topics=("t",), regex="re-.*")
    first = a.heartbeat()
    assert first.assignment is not None and set(first.assignment) == {lit}  # literal only
    settle([a])
    assert set(a.owned) == {lit, cluster.topics["re-1"].topic_id}  # the matches follow
    b = Member(coord, "b", topics=("t",), regex="re-.*")  # a regex the group already uses
    b.heartbeat()
    subs = coord.consumer._subscriptions(coord.consumer.groups["g"], {})
    assert subs["b"] == frozenset({"t", "re-1"})
