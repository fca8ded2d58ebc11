"""Partition reassignment (Kafka's onPartitionReassignment), as tools ask for it through
``/admin/reassign_partitions`` (CMAK, kafka-reassign-partitions --zookeeper).

While a partition moves, its replicas are the target followed by the old ones it leaves
(``adding_replicas`` / ``removing_replicas`` in ``/brokers/topics/<t>``); the new replicas
get LeaderAndIsr and start fetching. Once every target replica is in the ISR (the leader's
AlterPartition says so) the move completes: leadership moves into the target if needed, the
replicas left behind leave the ISR and are deleted (StopReplica delete), the assignment
becomes the target and the partition leaves the request znode (deleted when empty).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tidelog.server.metadata.zk_data import LeaderIsrAndControllerEpoch, ReplicaAssignment
from tidelog.util.topic_partition import TopicPartition

from . import election

if TYPE_CHECKING:
    from .controller import KafkaController

log = logging.getLogger(__name__)


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """Kafka's ReplicaAssignment.reassignTo: target first, then the replicas it leaves."""
    original = [b for b in current.replicas if b not in current.adding_replicas]
    replicas = tuple(dict.fromkeys([*target, *original]))
    return ReplicaAssignment(
        replicas,
        tuple(b for b in target if b not in original),
        tuple(b for b in original if b not in target),
    )


class ReassignmentManager:
    def __init__(self, controller: KafkaController) -> None:
        self.c = controller
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}

    async def on_znode_change(self) -> None:
        c, ctx = self.c, self.c.context
        if not c.is_active:
            return
        asked = await c.call(c.zk.get_reassignment, c._watch(self.on_znode_change))
        for tp, target in asked.items():
            if tp not in ctx.assignments or not target or len(set(target)) != len(target):
                log.warning("ignoring the reassignment of %s to %s", tp, target)
                continue
            self.targets[tp] = tuple(target)
        await self.advance(list(asked))

    async def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        moving = [tp for tp in partitions if tp in self.targets]
        if moving:
            await self.advance(moving)

    async def advance(self, partitions: Iterable[TopicPartition]) -> None:
        done: list[TopicPartition] = []
        for tp in partitions:
            if tp in self.targets and await self._step(tp):
                done.append(tp)
        if done:
            await self._forget(done)

    async def _step(self, tp: TopicPartition) -> bool:
        """Start or finish one partition's move; True when it is complete."""
        c, ctx = self.c, self.c.context
        target = self.targets[tp]
        current = ctx.assignments[tp]
        if current.replicas == target and not current.adding_replicas:
            return True
        moving = reassign_to(current, target)
        if moving != current:
            await self._write_assignment(tp, moving)
            batch = c.batch()
            live = ctx.live_broker_ids()
            batch.add_leader_and_isr([b for b in moving.replicas if b in live], tp)
            c.send(batch)
        state = ctx.leadership.get(tp)
        if state is None or not set(target) <= set(state.isr):
            return False  # the new replicas are catching up
        await self._complete(tp, moving, target)
        return True

    async def _complete(self, tp: TopicPartition, moving: ReplicaAssignment, target: tuple[int, ...]) -> None:
        c, ctx = self.c, self.c.context
        batch = c.batch()
        live = ctx.live_not_shutting_down()

        def move_leader(_tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if s.leader in target and s.leader in live:
                return s.new_leader_and_isr(s.leader, s.isr)  # a new epoch for the new replica set
            return election.elect_for_reassignment(s, target, live, ctx.epoch)

        await c.partitions.update([tp], move_leader, batch)
        for b in moving.removing_replicas:
            await c.partitions.remove_replica_from_isr(b, [tp], batch)
            if b in ctx.live_brokers:
                batch.add_stop_replica(b, tp, delete=True)
        await self._write_assignment(tp, ReplicaAssignment(target))
        batch.add_update_metadata(ctx.live_or_shutting_down(), [tp])
        c.send(batch)
        log.info("controller %d: %s reassigned to %s", c.broker_id, tp, list(target))

    async def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        c, ctx = self.c, self.c.context
        got = await c.call(c.zk.get_topic_assignment, tp.topic)
        if got is None:
            return
        current, version = got
        merged = dict(current.partitions) | {tp.partition: assignment}
        await c.call(c.zk.set_topic_assignment, tp.topic, ctx.topic_ids.get(tp.topic),
                     merged, version, ctx.epoch_zk_version)  # fmt: skip
        ctx.assignments[tp] = assignment

    async def _forget(self, done: list[TopicPartition]) -> None:
        """Completed partitions leave ``/admin/reassign_partitions``; the last one deletes it."""
        c, ctx = self.c, self.c.context
        for tp in done:
            self.targets.pop(tp, None)
        asked = await c.call(c.zk.get_reassignment)
        left = {tp: r for tp, r in asked.items() if tp not in done}
        if not left:
            await c.call(c.zk.delete_reassignment, ctx.epoch_zk_version)
        elif left != asked:
            await c.call(c.zk.set_reassignment, left, ctx.epoch_zk_version)
