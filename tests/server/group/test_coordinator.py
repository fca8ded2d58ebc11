"""The classic group state machine, driven through a ManualClock (no sleeps)."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.group import GroupState
from tidelog.server.coordinator.group.member import JoinResult, SyncResult

from .harness import REBALANCE, SESSION, Harness, subscription


def _join(r: object) -> JoinResult:
    assert isinstance(r, JoinResult)
    return r


def _sync(r: object) -> SyncResult:
    assert isinstance(r, SyncResult)
    return r


def test_single_member_full_cycle() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    box = h.join("g")
    r = _join(box.one)
    assert r.error == ErrorCode.NONE
    assert r.generation_id == 1 and r.leader_id == r.member_id and r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [r.member_id]
    assert r.member_id.startswith("client-")
    g = h.coord.groups["g"]
    assert g.state == GroupState.COMPLETING_REBALANCE
    s = h.sync("g", r.member_id, 1, {r.member_id: b"asg"})
    assert _sync(s.one).assignment == b"asg"
    assert g.state == GroupState.STABLE
    assert h.coord.heartbeat("g", r.member_id, 1) == ErrorCode.NONE


def test_initial_rebalance_delay_collects_members() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    boxes = [h.join("g") for _ in range(3)]
    assert not any(b.done for b in boxes)
    assert h.coord.groups["g"].state == GroupState.PREPARING_REBALANCE
    h.clock.advance(3000)
    # members 2 and 3 arrived during the delay: Kafka waits one more delay for stragglers
    assert not any(b.done for b in boxes)
    h.clock.advance(2999)
    assert not any(b.done for b in boxes)
    h.clock.advance(1)
    results = [_join(b.one) for b in boxes]
    assert {r.generation_id for r in results} == {1}
    leaders = [r for r in results if r.members]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assert all(r.leader_id == leaders[0].member_id for r in results)


def test_initial_delay_extends_while_members_arrive_up_to_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    first = h.join("g", rebalance=7000)
    h.clock.advance(2000)
    second = h.join("g", rebalance=7000)
    h.clock.advance(1000)  # first delay ends; a member arrived during it: wait again
    assert not first.done and not second.done
    h.clock.advance(2000)
    third = h.join("g", rebalance=7000)
    h.clock.advance(1000)  # second delay ends at 6000; third arrived: wait min(3000, 1000)
    assert not first.done
    h.clock.advance(1000)  # the rebalance timeout (7000) caps the waiting
    assert all(_join(b.one).generation_id == 1 for b in (first, second, third))


def test_member_id_required_then_rejoin() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = _join(h.join("g", require_known=True).one)
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    assert "g" in h.coord.groups and first.member_id in h.coord.groups["g"].pending_members
    second = _join(h.join("g", first.member_id, require_known=True).one)
    assert second.error == ErrorCode.NONE and second.member_id == first.member_id


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    r = _join(h.join("g", require_known=True).one)
    h.clock.advance(SESSION)
    assert "g" not in h.coord.groups
    late = _join(h.join("g", r.member_id).one)
    assert late.error == ErrorCode.UNKNOWN_MEMBER_ID


def test_invalid_session_timeout_and_group_id() -> None:
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=60000)
    assert _join(h.join("g", session=5999).one).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert _join(h.join("g", session=60001).one).error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert _join(h.join("").one).error == ErrorCode.INVALID_GROUP_ID
    assert "g" not in h.coord.groups


def test_protocol_selection_by_votes_and_inconsistent_protocol() -> None:
    h = Harness()
    a = h.join("g", protocols=[("roundrobin", b"1"), ("range", b"1")])
    b = h.join("g", protocols=[("range", b"2"), ("roundrobin", b"2")])
    c = h.join("g", protocols=[("roundrobin", b"3"), ("range", b"3"), ("sticky", b"3")])
    bad = h.join("g", protocols=[("cooperative-sticky", b"x")])
    assert _join(bad.one).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.join("g", protocol_type="connect")
    assert _join(wrong_type.one).error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    h.finish_delay([a, b, c])
    results = [_join(x.one) for x in (a, b, c)]
    assert {r.protocol_name for r in results} == {"roundrobin"}  # 2 votes against 1
    leader = next(r for r in results if r.members)
    assert sorted(m.metadata for m in leader.members) == [b"1", b"2", b"3"]


def test_second_member_triggers_rebalance_and_old_member_rejoins() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [m1] = h.stable_group(1)
    joiner = h.join("g")
    g = h.coord.groups["g"]
    assert g.state == GroupState.PREPARING_REBALANCE and not joiner.done
    assert h.coord.heartbeat("g", m1, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert _sync(h.sync("g", m1, 1).one).error == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", m1)
    r1, r2 = _join(rejoin.one), _join(joiner.one)
    assert r1.generation_id == r2.generation_id == 2
    assert r1.leader_id == m1 and len(r1.members) == 2 and r2.members == []
    # the old generation is fenced
    assert h.coord.heartbeat("g", m1, 1) == ErrorCode.ILLEGAL_GENERATION
    h.sync_all("g", [m1, r2.member_id])
    assert g.state == GroupState.STABLE


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    h = Harness()
    m1, m2 = h.stable_group(2)
    g = h.coord.groups["g"]
    h.clock.advance(SESSION - 1)
    h.heartbeat_all("g", [m1, m2])
    box = h.join("g", m1, protocols=[("range", subscription("t", "u"))])  # metadata changed
    assert g.state == GroupState.PREPARING_REBALANCE and not box.done
    # m2 keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000 - 1)
        assert h.coord.heartbeat("g", m2, 1) == ErrorCode.REBALANCE_IN_PROGRESS
        if box.done:
            break
    h.clock.advance(REBALANCE)
    r = _join(box.one)
    assert r.generation_id == 2 and [m.member_id for m in r.members] == [m1]
    assert m2 not in g.members
    assert h.coord.heartbeat("g", m2, 2) == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_silent_member_and_rebalances() -> None:
    h = Harness()
    m1, m2, m3 = h.stable_group(3)
    g = h.coord.groups["g"]
    for step in (SESSION // 2, SESSION // 2 - 1):
        h.clock.advance(step)
        assert h.heartbeat_all("g", [m1, m2]) == [ErrorCode.NONE] * 2
    assert m3 in g.members
    h.clock.advance(1)  # m3 has been silent for exactly one session timeout
    assert m3 not in g.members and g.state == GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", m1, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    b1, b2 = h.join("g", m1), h.join("g", m2)
    assert _join(b1.one).generation_id == 2 and _join(b2.one).generation_id == 2


def test_session_expiry_is_exactly_the_session_timeout() -> None:
    h = Harness()
    [m1] = h.stable_group(1)
    h.clock.advance(SESSION - 1)
    assert m1 in h.coord.groups["g"].members
    h.clock.advance(1)
    g = h.coord.groups["g"]
    assert m1 not in g.members
    assert g.state == GroupState.EMPTY and g.generation_id == 2  # rebalanced to empty


def test_join_that_outlasts_the_session_timeout_still_expires_on_time() -> None:
    """A member's first join waits longer than its session timeout (the initial delay,
    re-armed as members keep arriving); once joined, silence for one session timeout must
    remove it. While it waited, its expiry timer was re-armed at new_member_join_timeout (5
    minutes): that timer has to be pulled back in when the join completes."""
    session, step = 1500, 100
    h = Harness(group_initial_rebalance_delay_ms=1000, group_min_session_timeout_ms=500)
    start = h.clock.milliseconds()
    first = h.join("g", session=session)
    h.clock.advance(900)
    second = h.join("g", session=session)  # re-arms the initial delay
    while not first.done:
        h.clock.advance(step)
    joined = h.clock.milliseconds()
    assert joined - start > session  # the session timer fired while the join waited
    assert [_join(b.one).error for b in (first, second)] == [ErrorCode.NONE] * 2
    ids = [_join(b.one).member_id for b in (first, second)]
    h.sync_all("g", ids)
    g = h.coord.groups["g"]
    synced = h.clock.milliseconds()
    while ids[0] in g.members and h.clock.milliseconds() < synced + 2 * session:
        assert h.coord.heartbeat("g", ids[1], g.generation_id) == ErrorCode.NONE  # ids[0] not
        h.clock.advance(step)
    assert ids[0] not in g.members, "a silent member outlived its session timeout"
    assert h.clock.milliseconds() == synced + session  # its last sign of life: the SyncGroup
    assert h.coord.heartbeat("g", ids[1], 1) == ErrorCode.REBALANCE_IN_PROGRESS


def test_leave_group_batched_and_errors() -> None:
    h = Harness()
    m1, m2, m3 = h.stable_group(3)
    err, per_member = h.coord.leave_group("g", [(m2, None), ("nope", None), (m3, None)])
    assert err == ErrorCode.NONE
    assert per_member == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.NONE]
    g = h.coord.groups["g"]
    assert set(g.members) == {m1} and g.state == GroupState.PREPARING_REBALANCE
    assert _join(h.join("g", m1).one).generation_id == 2
    assert h.coord.leave_group("unknown-group", [(m1, None)]) == (
        ErrorCode.NONE,
        [ErrorCode.UNKNOWN_MEMBER_ID],
    )


def test_last_member_leaving_empties_group() -> None:
    h = Harness()
    [m1] = h.stable_group(1)
    assert h.coord.leave_group("g", [(m1, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    g = h.coord.groups["g"]
    assert g.state == GroupState.EMPTY and not g.members


def test_leader_leaving_during_completing_rebalance_fails_pending_syncs() -> None:
    h = Harness()
    boxes = [h.join("g") for _ in range(2)]
    h.finish_delay(boxes)
    r = [_join(b.one) for b in boxes]
    leader = next(x for x in r if x.members).member_id
    follower = next(x for x in r if not x.members).member_id
    pending = h.sync("g", follower, 1)
    assert not pending.done
    h.coord.leave_group("g", [(leader, None)])
    assert _sync(pending.one).error == ErrorCode.REBALANCE_IN_PROGRESS
    again = _join(h.join("g", follower).one)
    assert again.generation_id == 2 and again.leader_id == follower


def test_followers_wait_for_leader_sync() -> None:
    h = Harness()
    boxes = [h.join("g") for _ in range(3)]
    h.finish_delay(boxes)
    r = [_join(b.one) for b in boxes]
    leader = next(x for x in r if x.members)
    followers = [x.member_id for x in r if not x.members]
    pending = [h.sync("g", f, 1) for f in followers]
    assert not any(p.done for p in pending)
    assignments = {x.member_id: x.member_id.encode() for x in r if x.member_id != followers[1]}
    lead = h.sync("g", leader.member_id, 1, assignments)
    assert _sync(lead.one).assignment == leader.member_id.encode()
    assert _sync(pending[0].one).assignment == followers[0].encode()
    assert _sync(pending[1].one).assignment == b""  # missing from the plan: empty
    # a late (retried) sync in Stable gets the stored assignment
    assert _sync(h.sync("g", followers[0], 1).one).assignment == followers[0].encode()


def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    h = Harness()
    boxes = [h.join("g") for _ in range(2)]
    h.finish_delay(boxes)
    r = [_join(b.one) for b in boxes]
    leader = next(x for x in r if x.members).member_id
    lazy = next(x for x in r if not x.members).member_id
    h.sync("g", leader, 1, {leader: b"x", lazy: b"y"})
    g = h.coord.groups["g"]
    assert g.state == GroupState.STABLE
    for _ in range(REBALANCE // 5000):
        h.clock.advance(5000)
        h.coord.heartbeat("g", leader, g.generation_id)
        h.coord.heartbeat("g", lazy, g.generation_id)  # heartbeats but never syncs
    assert lazy not in g.members and g.state == GroupState.PREPARING_REBALANCE


def test_sync_errors() -> None:
    h = Harness()
    [m1] = h.stable_group(1)
    assert _sync(h.sync("g", "nobody", 1).one).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert _sync(h.sync("g", m1, 7).one).error == ErrorCode.ILLEGAL_GENERATION
    assert _sync(h.sync("other", m1, 1).one).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_unknown_member_join_and_heartbeat() -> None:
    h = Harness()
    h.stable_group(1)
    assert _join(h.join("g", "ghost").one).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert _join(h.join("new-group", "ghost").one).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("g", "ghost", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("zzz", "ghost", 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_follower_rejoin_in_stable_with_same_metadata_does_not_rebalance() -> None:
    h = Harness()
    ids = h.stable_group(2)
    g = h.coord.groups["g"]
    follower = next(m for m in ids if m != g.leader_id)
    r = _join(h.join("g", follower).one)
    assert r.error == ErrorCode.NONE and r.generation_id == 1
    assert g.state == GroupState.STABLE


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    boxes = [h.join("g", instance=f"i{i}") for i in range(2)]
    h.finish_delay(boxes)
    ids = [_join(b.one).member_id for b in boxes]
    assert all(m.startswith(f"i{i}-") for i, m in enumerate(ids))
    h.sync_all("g", ids)
    g = h.coord.groups["g"]
    follower_idx = 0 if ids[0] != g.leader_id else 1
    old = ids[follower_idx]
    # the static member restarts (new process, no member id)
    r = _join(h.join("g", instance=f"i{follower_idx}").one)
    assert r.error == ErrorCode.NONE and r.member_id != old and r.generation_id == 1
    assert g.state == GroupState.STABLE
    assert g.members[r.member_id].assignment == f"a-{old}".encode()
    # the old incarnation is fenced
    assert (
        h.coord.heartbeat("g", old, 1, group_instance_id=f"i{follower_idx}")
        == ErrorCode.FENCED_INSTANCE_ID
    )
    assert h.coord.heartbeat("g", r.member_id, 1, f"i{follower_idx}") == ErrorCode.NONE


def test_static_member_leave_by_instance_id() -> None:
    h = Harness()
    [b] = [h.join("g", instance="i0")]
    h.clock.advance(3000)
    mid = _join(b.one).member_id
    h.sync_all("g", [mid])
    assert h.coord.leave_group("g", [("", "i0")]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert h.coord.leave_group("g", [("", "i0")]) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])


def test_static_member_wrong_member_id_is_fenced_on_leave() -> None:
    h = Harness()
    b = h.join("g", instance="i0")
    h.clock.advance(3000)
    mid = _join(b.one).member_id
    _err, per = h.coord.leave_group("g", [("someone-else", "i0")])
    assert per == [ErrorCode.FENCED_INSTANCE_ID] and mid in h.coord.groups["g"].members


def test_group_max_size() -> None:
    h = Harness(group_max_size=2)
    h.join("g")
    h.join("g")
    assert _join(h.join("g").one).error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_duplicate_join_replaces_waiting_callback() -> None:
    h = Harness()
    ids = h.stable_group(2)
    h.join("g")  # a third member -> rebalance
    first = h.join("g", ids[0])
    second = h.join("g", ids[0])  # a retry while the first is still waiting
    assert _join(first.one).error == ErrorCode.REBALANCE_IN_PROGRESS
    h.join("g", ids[1])
    assert _join(second.one).generation_id == 2


def test_coordinator_not_active_and_loading() -> None:
    h = Harness()
    h.coord.manager.mark_loading([h.coord.manager.partition_for("g")])
    assert _join(h.join("g").one).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.heartbeat("g", "m", 1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.coord.shutdown()
    assert _join(h.join("g2").one).error == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_failed_group_write_on_empty_does_not_break_the_state_machine() -> None:
    h = Harness()
    [m1] = h.stable_group(1)
    h.store.fail_appends = True
    assert h.coord.leave_group("g", [(m1, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
    assert h.coord.groups["g"].state == GroupState.EMPTY
    h.store.fail_appends = False
    box = h.join("g")
    h.finish_delay([box])
    assert _join(box.one).error == ErrorCode.NONE and _join(box.one).generation_id == 3


def test_failed_assignment_write_fails_the_sync_and_rebalances() -> None:
    h = Harness()
    boxes = [h.join("g") for _ in range(2)]
    h.finish_delay(boxes)
    r = [_join(b.one) for b in boxes]
    leader = next(x for x in r if x.members).member_id
    follower = next(x for x in r if not x.members).member_id
    pending = h.sync("g", follower, 1)
    h.store.fail_appends = True
    lead = h.sync("g", leader, 1, {leader: b"x", follower: b"y"})
    assert _sync(lead.one).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert _sync(pending.one).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.coord.groups["g"].state == GroupState.PREPARING_REBALANCE


def test_shutdown_stops_every_timer() -> None:
    h = Harness()
    h.stable_group(2)
    h.join("g", require_known=True)  # a pending member with its own timer
    h.coord.shutdown()
    assert h.scheduler.tasks() == []
    members = set(h.coord.groups["g"].members)
    h.clock.advance(10 * SESSION)
    assert set(h.coord.groups["g"].members) == members  # nothing expired after shutdown
