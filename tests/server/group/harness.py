"""A coordinator on a ManualClock + ManualScheduler + in-memory store, and helpers that
speak the classic protocol through it the way a consumer would."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import GroupCoordinator, JoinRequest, SyncRequest
from tidelog.server.coordinator.group.member import JoinResult, SyncResult
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler

SESSION = 10_000
REBALANCE = 30_000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


@dataclass
class Box:
    """Collects the (possibly delayed) callback results of one request."""

    results: list[JoinResult | SyncResult] = field(default_factory=list)

    def __call__(self, r: JoinResult | SyncResult) -> None:
        self.results.append(r)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def one(self) -> JoinResult | SyncResult:
        assert len(self.results) == 1, self.results
        return self.results[0]


class Harness:
    def __init__(self, store: InMemoryOffsetsStore | None = None, **cfg: int) -> None:
        defaults = {"group_initial_rebalance_delay_ms": 3000, "offsets_topic_num_partitions": 5}
        defaults.update(cfg)
        self.config = GroupConfig(**defaults)  # type: ignore[arg-type]
        self.clock = ManualClock()
        self.scheduler = ManualScheduler(self.clock)
        self.store = store if store is not None else InMemoryOffsetsStore()
        self.coord = GroupCoordinator(
            self.config, clock=self.clock, scheduler=self.scheduler, store=self.store
        )
        self.coord.startup()

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        protocols: list[tuple[str, bytes]] | None = None,
        instance: str | None = None,
        require_known: bool = False,
        session: int = SESSION,
        rebalance: int = REBALANCE,
        protocol_type: str = "consumer",
        client_id: str = "client",
    ) -> Box:
        box = Box()
        req = JoinRequest(
            group_id=group,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protocols or [("range", subscription("t"))],
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            group_instance_id=instance,
            client_id=client_id,
            client_host="/127.0.0.1",
            require_known_member_id=require_known,
        )
        self.coord.join_group(req, box)
        return box

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> Box:
        box = Box()
        self.coord.sync_group(
            SyncRequest(group, generation, member_id, instance, assignments=assignments or {}), box
        )
        return box

    def stable_group(self, n: int, group: str = "g") -> list[str]:
        """n members join an empty group within the initial delay, then sync (the leader
        assigns b"a-<member>")."""
        boxes = [self.join(group) for _ in range(n)]
        self.finish_delay(boxes)
        results = [b.one for b in boxes]
        assert all(isinstance(r, JoinResult) and r.error == ErrorCode.NONE for r in results)
        ids = [r.member_id for r in results]  # type: ignore[union-attr]
        return self.sync_all(group, ids)

    def finish_delay(self, boxes: list[Box]) -> None:
        """Advance through the initial delay (extended while members kept arriving)."""
        for _ in range(100):
            if all(b.done for b in boxes):
                return
            self.clock.advance(max(self.config.group_initial_rebalance_delay_ms, 1))
        raise AssertionError("join never completed")

    def sync_all(self, group: str, ids: list[str]) -> list[str]:
        g = self.coord.groups[group]
        leader = g.leader_id
        assert leader is not None
        gen = g.generation_id
        followers = [self.sync(group, m, gen) for m in ids if m != leader]
        lead = self.sync(group, leader, gen, {m: f"a-{m}".encode() for m in ids})
        for b in [*followers, lead]:
            assert b.one.error == ErrorCode.NONE, b.one
        return ids

    def heartbeat_all(self, group: str, ids: list[str]) -> list[ErrorCode]:
        gen = self.coord.groups[group].generation_id
        return [self.coord.heartbeat(group, m, gen) for m in ids]
