"""Hypothesis drives random member behaviour (join, rejoin, sync, heartbeat, commit, leave,
silence) through the coordinator on a ManualClock and checks Kafka's invariants after every
step: every request is answered exactly once, states and generations are consistent, and a
member that follows the protocol always ends up in a Stable group."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.coordinator import CommitEntry
from tidelog.server.coordinator.group.group import GroupState
from tidelog.server.coordinator.group.member import JoinResult, SyncResult
from tidelog.util.topic_partition import TopicPartition

from .harness import Box, Harness

SESSION = 10_000


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    joining: Box | None = None
    syncing: Box | None = None
    boxes: list[Box] = field(default_factory=list)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "sync", "heartbeat", "commit", "leave", "advance"]),
        st.integers(0, 3),  # which client
        st.integers(1, 12_000),  # ms for "advance"
    ),
    max_size=60,
)


def _step(h: Harness, clients: list[Client], op: str, i: int, ms: int) -> None:
    c = clients[i]
    if op == "advance":
        h.clock.advance(ms)
    elif op == "join" and c.joining is None:
        c.joining = h.join("g", c.member_id, require_known=True, session=SESSION)
        c.boxes.append(c.joining)
    elif op == "sync" and c.syncing is None and c.generation >= 0:
        c.syncing = h.sync(
            "g", c.member_id, c.generation, {m.member_id: b"a" for m in clients if m.member_id}
        )
        c.boxes.append(c.syncing)
    elif op == "heartbeat" and c.member_id:
        h.coord.heartbeat("g", c.member_id, c.generation)
    elif op == "commit" and c.member_id:
        h.coord.commit_offsets(
            "g",
            {TopicPartition("t", 0): CommitEntry(ms)},
            member_id=c.member_id,
            generation_id=c.generation,
        )
    elif op == "leave" and c.member_id:
        h.coord.leave_group("g", [(c.member_id, None)])
    _collect(clients)


def _collect(clients: list[Client]) -> None:
    """Apply answered requests to the client's view (what a consumer would remember)."""
    for c in clients:
        if c.joining is not None and c.joining.done:
            r = c.joining.one
            assert isinstance(r, JoinResult)
            if r.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                c.member_id = r.member_id
            if r.error == ErrorCode.NONE:
                c.generation = r.generation_id
            elif r.error == ErrorCode.UNKNOWN_MEMBER_ID:
                c.member_id, c.generation = "", -1
            c.joining = None
        if c.syncing is not None and c.syncing.done:
            assert isinstance(c.syncing.one, SyncResult)
            c.syncing = None


def _check_invariants(h: Harness, clients: list[Client]) -> None:
    for c in clients:
        for b in c.boxes:
            assert len(b.results) <= 1, "a request was answered twice"
    g = h.coord.groups.get("g")
    if g is None:
        return
    if g.members:
        assert g.leader_id in g.members
    if g.state == GroupState.EMPTY:
        assert not g.members
    if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert g.protocol_name == "range" and g.generation_id >= 1
        assert not any(m.is_awaiting_join for m in g.members.values())
    if g.state != GroupState.COMPLETING_REBALANCE:
        assert not any(m.is_awaiting_sync for m in g.members.values())
    for m in g.members.values():
        assert m.heartbeat_task is not None and not m.heartbeat_task.cancelled


def _settle(h: Harness, clients: list[Client]) -> None:
    """Every client now follows the protocol: rejoin when told, sync, heartbeat."""
    for _ in range(40):
        for c in clients:
            if c.joining is None and c.syncing is None:
                r = h.coord.heartbeat("g", c.member_id, c.generation) if c.member_id else None
                if r != ErrorCode.NONE:
                    c.joining = h.join("g", c.member_id, require_known=True, session=SESSION)
                    c.boxes.append(c.joining)
        _collect(clients)
        g = h.coord.groups.get("g")
        if g is not None and g.state == GroupState.COMPLETING_REBALANCE:
            for c in clients:
                if c.member_id in g.members and c.syncing is None:
                    c.syncing = h.sync("g", c.member_id, c.generation, {m: b"a" for m in g.members})
                    c.boxes.append(c.syncing)
            _collect(clients)
        if (
            g is not None
            and g.state == GroupState.STABLE
            and all(c.member_id in g.members and c.generation == g.generation_id for c in clients)
        ):
            return
        h.clock.advance(1000)
    raise AssertionError(f"never stabilised: {h.coord.groups['g'].state}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, delay=st.sampled_from([0, 3000]))
def test_random_member_behaviour_keeps_invariants_and_converges(
    ops: list[tuple[str, int, int]], delay: int
) -> None:
    h = Harness(group_initial_rebalance_delay_ms=delay)
    clients = [Client() for _ in range(4)]
    for op, i, ms in ops:
        _step(h, clients, op, i, ms)
        _check_invariants(h, clients)
    _settle(h, clients)
    _check_invariants(h, clients)
    g = h.coord.groups["g"]
    assert set(g.members) == {c.member_id for c in clients}
