"""A group coordinator on a ManualClock + ManualScheduler + in-memory ``__consumer_offsets``,
and a member that heartbeats through it the way librdkafka does with
``group.protocol=consumer``: it reports what it owns, lets go of what the coordinator
revokes and takes what it is given."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.coordinator import HeartbeatRequest, HeartbeatResult
from tidelog.server.coordinator.group.consumer.records import Assignment, TopicMetadata
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler

SESSION_MS = 45_000
REBALANCE_MS = 30_000


class Cluster:
    """Topics as the broker's metadata would give them."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicMetadata] = {}

    def create(self, name: str, partitions: int) -> uuid.UUID:
        tid = uuid.uuid4()
        self.topics[name] = TopicMetadata(tid, name, partitions)
        return tid

    def __call__(self) -> dict[str, TopicMetadata]:
        return dict(self.topics)


def coordinator(store: InMemoryOffsetsStore, cluster: Cluster, clock: ManualClock,
                **config: int) -> GroupCoordinator:
    coord = GroupCoordinator(GroupConfig(offsets_topic_num_partitions=1, **config),
                             clock=clock, scheduler=ManualScheduler(clock), store=store)
    coord.startup()
    coord.consumer.topics = cluster
    return coord


@dataclass
class Member:
    coord: GroupCoordinator
    member_id: str
    group_id: str = "g"
    topics: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    instance_id: str | None = None
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)
    history: list[Assignment] = field(default_factory=list)
    last: HeartbeatResult | None = None

    def heartbeat(self) -> HeartbeatResult:
        joining = self.epoch == 0
        r = self.coord.consumer.heartbeat(HeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.epoch,
            rebalance_timeout_ms=REBALANCE_MS if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            instance_id=self.instance_id if joining else None,
            owned=dict(self.owned), client_id=self.member_id, client_host="/127.0.0.1"))
        self.last = r
        if r.error == ErrorCode.NONE:
            self.epoch = r.member_epoch
            if r.assignment is not None:  # revoked partitions are let go at once
                self.owned = dict(r.assignment)
                self.history.append(dict(r.assignment))
        return r

    def leave(self, static: bool = False) -> HeartbeatResult:
        r = self.coord.consumer.heartbeat(HeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=-2 if static else -1,
            instance_id=self.instance_id))
        self.epoch, self.owned = 0, {}
        return r

    def partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def settle(members: list[Member], rounds: int = 10) -> None:
    """Heartbeat everyone until nobody's assignment or epoch changes."""
    for _ in range(rounds):
        before = [(m.epoch, m.partitions()) for m in members]
        for m in members:
            assert m.heartbeat().error == ErrorCode.NONE, m.last
        if before == [(m.epoch, m.partitions()) for m in members]:
            return
    raise AssertionError("the group did not settle")


def owners(members: list[Member]) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for m in members:
        for tp in m.partitions():
            out.setdefault(tp, []).append(m.member_id)
    return out
