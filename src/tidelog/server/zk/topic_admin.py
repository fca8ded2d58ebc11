"""Topic administration on ZooKeeper (Kafka's ZkAdminManager and AdminZkClient).

Any broker accepts CreateTopics, CreatePartitions, DeleteTopics and topic config changes:
it validates, places replicas (the controller's placement rules), writes the znodes the
controller watches (``/config/topics/<t>`` then ``/brokers/topics/<t>``; a deletion under
``/admin/delete_topics``) and waits until every new partition has a leader (Kafka's
DelayedCreatePartitions) or the request's timeout passes (REQUEST_TIMED_OUT; the topic is
still created, as in Kafka). ``leaders_ready`` says when the brokers can be told the topic
is there: by default when the partition state znodes name leaders; ``peers_ready`` then
waits, within the timeout, for the other brokers' metadata to show them too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

from ..errors import ApiError
from ..metadata.replica_placement import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    new_partitions_assignment,
)
from . import data as z
from .client import KafkaZkClient, TopicExistsError

T = TypeVar("T")
LeadersReady = Callable[[str, Sequence[int]], bool]
# (topic, partitions, time.monotonic() deadline): wait until the other brokers show them too
PeersReady = Callable[[str, Sequence[int], float], Awaitable[object]]
POLL_S = 0.02


class ZkTopicAdmin:
    def __init__(
        self,
        zk: KafkaZkClient,
        *,
        num_partitions: int = 1,
        default_replication_factor: int = 1,
        leaders_ready: LeadersReady | None = None,
        peers_ready: PeersReady | None = None,
    ) -> None:
        self.zk = zk
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        self.leaders_ready = leaders_ready or self._states_have_leaders
        self.peers_ready = peers_ready

    async def _zk(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.to_thread(fn, *args)

    async def live_brokers(self) -> list[BrokerMetadata]:
        regs = await self._zk(self.zk.get_all_brokers)
        return [BrokerMetadata(b, regs[b].rack) for b in sorted(regs)]

    # --- create ---------------------------------------------------------------------------------

    async def plan_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """The replicas of each partition of a new topic, validated as Kafka validates."""
        if await self._zk(self.zk.get_topic_assignment, name) is not None:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        brokers = await self.live_brokers()
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor "
                               "and replicasAssignments were set. Both cannot be used at the same time.")  # fmt: skip
            return self._check_assignment(assignment, {b.broker_id for b in brokers}, 0)
        partitions = self.num_partitions if num_partitions == -1 else num_partitions
        rf = self.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise ApiError(ErrorCode.INVALID_PARTITIONS,
                           "Number of partitions was set to an invalid non-positive value.")  # fmt: skip
        if rf <= 0:
            raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger "
                           "than 0, or -1 to use the default value.")  # fmt: skip
        return {p: tuple(r) for p, r in _place(brokers, partitions, rf).items()}

    @staticmethod
    def _check_assignment(
        assignment: Mapping[int, Sequence[int]], live: set[int], first_partition: int
    ) -> dict[int, tuple[int, ...]]:
        parts = sorted(assignment)
        if parts != list(range(first_partition, first_partition + len(parts))):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "Partitions should be a consecutive 0-based integer sequence")  # fmt: skip
        sizes = {len(r) for r in assignment.values()}
        for p, replicas in assignment.items():
            if not replicas:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Replica list of partition {p} is empty.")
            if len(set(replicas)) != len(replicas):
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Duplicate replica assignment found: {list(replicas)}")  # fmt: skip
            unknown = set(replicas) - live
            if unknown:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Unknown broker(s) in replica assignment: {sorted(unknown)}.")  # fmt: skip
        if len(sizes) > 1:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "All partitions should have the same number of replicas")  # fmt: skip
        return {p: tuple(assignment[p]) for p in parts}

    async def create_topic(
        self,
        name: str,
        plan: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
        *,
        topic_id: uuid.UUID | None = None,
        timeout_ms: int = 30_000,
    ) -> uuid.UUID:
        """Write the topic (configs first, then the assignment) and wait for its leaders."""
        tid = topic_id or uuid.uuid4()
        assignment = {p: z.ReplicaAssignment(tuple(r)) for p, r in plan.items()}
        try:
            await self._zk(self.zk.create_topic, name, tid, assignment, dict(configs))
        except TopicExistsError:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        await self.wait_for_leaders(name, sorted(plan), timeout_ms)
        return tid

    async def wait_for_leaders(self, name: str, partitions: Sequence[int], timeout_ms: int) -> None:
        deadline = time.monotonic() + timeout_ms / 1000
        while not await self._ready(name, partitions):
            if time.monotonic() >= deadline:
                raise ApiError(ErrorCode.REQUEST_TIMED_OUT,
                               f"Timed out waiting for the leaders of {name}.")  # fmt: skip
            await asyncio.sleep(POLL_S)
        if self.peers_ready is not None:  # the other brokers, within what is left
            await self.peers_ready(name, partitions, deadline)

    async def _ready(self, name: str, partitions: Sequence[int]) -> bool:
        if self.leaders_ready is self._states_have_leaders:
            return await self._zk(self._states_have_leaders, name, partitions)
        return self.leaders_ready(name, partitions)

    def _states_have_leaders(self, name: str, partitions: Sequence[int]) -> bool:
        tps = [TopicPartition(name, p) for p in partitions]
        states = self.zk.get_topic_partition_states(tps)
        return len(states) == len(tps) and all(s.leader >= 0 for s in states.values())

    # --- partitions, deletion, configs ----------------------------------------------------------

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        timeout_ms: int = 30_000,
    ) -> None:
        got = await self._zk(self.zk.get_topic_assignment, name)
        if got is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current, version = got
        existing = {p: a.replicas for p, a in current.partitions.items()}
        if count <= len(existing):
            raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {len(existing)} "
                           f"partitions, which is higher than the requested {count}.")  # fmt: skip
        brokers = await self.live_brokers()
        if assignment is not None:
            if len(assignment) != count - len(existing):
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Increasing the number of partitions by {count - len(existing)} but "
                               f"{len(assignment)} assignments provided.")  # fmt: skip
            added = self._check_assignment(
                {len(existing) + i: tuple(r) for i, r in enumerate(assignment)},
                {b.broker_id for b in brokers}, len(existing),
            )  # fmt: skip
        else:
            try:
                placed = new_partitions_assignment(brokers, existing, count)
            except (InvalidPartitionsError, InvalidReplicationFactorError, AdminOperationError) as e:
                raise _placement_error(e) from None
            added = {p: tuple(r) for p, r in placed.items()}
        if validate_only:
            return
        merged = dict(current.partitions) | {p: z.ReplicaAssignment(r) for p, r in added.items()}
        await self._zk(self.zk.set_topic_assignment, name, current.topic_id, merged, version)
        await self.wait_for_leaders(name, sorted(added), timeout_ms)

    async def delete_topic(self, name: str, *, timeout_ms: int = 30_000) -> None:
        """Ask the controller (``/admin/delete_topics/<t>``) and wait until the topic is gone:
        the topic of that id (one created again under the name at once, as a producer's
        auto-creation does, is another topic)."""
        found = await self._zk(self.zk.get_topic_assignment, name)
        if found is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        topic_id = found[0].topic_id
        await self._zk(self.zk.create_delete_topic_path, name)
        deadline = time.monotonic() + timeout_ms / 1000
        while (now := await self._zk(self.zk.get_topic_assignment, name)) is not None and \
                now[0].topic_id == topic_id:
            if time.monotonic() >= deadline:
                raise ApiError(ErrorCode.REQUEST_TIMED_OUT, f"Timed out deleting {name}.")
            await asyncio.sleep(POLL_S)

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's overrides and notify every broker (``/config/changes``)."""
        if await self._zk(self.zk.get_topic_assignment, name) is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        await self._zk(self.zk.set_or_create_entity_configs, "topics", name, dict(configs))

    async def topic_configs(self, name: str) -> dict[str, str]:
        return await self._zk(self.zk.get_entity_configs, "topics", name)

    async def internal_topic_ready(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> bool:
        """Kafka's getOrCreateInternalTopic: the topic exists, or is created now when enough
        brokers are alive for its replication factor; False means COORDINATOR_NOT_AVAILABLE."""
        if await self._zk(self.zk.get_topic_assignment, name) is not None:
            return await self._ready(name, list(range(partitions)))
        brokers = await self.live_brokers()
        if len(brokers) < replication_factor:
            return False
        try:
            plan = await self.plan_topic(name, partitions, replication_factor)
            await self.create_topic(name, plan, configs, timeout_ms=0)
        except ApiError:
            return False
        return False  # being created: the coordinator answers once leaders are there


def _place(brokers: Sequence[BrokerMetadata], partitions: int, rf: int) -> dict[int, list[int]]:
    try:
        return assign_replicas_to_brokers(brokers, partitions, rf)
    except (InvalidPartitionsError, InvalidReplicationFactorError, AdminOperationError) as e:
        raise _placement_error(e) from None


def _placement_error(e: Exception) -> ApiError:
    if isinstance(e, InvalidReplicationFactorError):
        return ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e))
    if isinstance(e, InvalidPartitionsError):
        return ApiError(ErrorCode.INVALID_PARTITIONS, str(e))
    return ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e))
