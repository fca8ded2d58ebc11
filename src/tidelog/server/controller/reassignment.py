"""Partition reassignment (Kafka's KafkaController.onPartitionReassignment), asked through
AlterPartitionReassignments or by a tool writing ``/admin/reassign_partitions``.

A moving partition's assignment is RS = target (TRS) followed by the original replicas it
leaves, with ``adding_replicas`` (AR) and ``removing_replicas`` (RR) recorded in
``/brokers/topics/<t>``: that znode is the whole state, so a new controller resumes every
move it finds there. Until every target replica is in the ISR, the leader epoch is bumped
and LeaderAndIsr carries the full replica set to all of them (the new replicas create
their logs and fetch). When the leader's AlterPartition brings the last target replica into
the ISR, the move completes: leadership moves into the target when the leader leaves (or is
dead), else the epoch is bumped again for the smaller set; the removed replicas leave the
ISR and are deleted (StopReplica delete); the assignment becomes the target; a tool's
request leaves the znode (deleted when empty). A newer request for a moving partition
supersedes the old one (its replicas no longer wanted are stopped and deleted at once); a
cancellation (no target) reverts to the original replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk.data import LeaderIsrAndControllerEpoch, ReplicaAssignment
from tidelog.util.topic_partition import TopicPartition

from . import election
from .host import ControllerHost

log = logging.getLogger(__name__)

Result = tuple[int, str | None]  # (error code, message)
NO_PARTITION: Result = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "The partition does not exist.")


def origin_replicas(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(b for b in a.replicas if b not in a.adding_replicas)


def target_replicas(a: ReplicaAssignment) -> tuple[int, ...]:
    return tuple(b for b in a.replicas if b not in a.removing_replicas)


def is_being_reassigned(a: ReplicaAssignment) -> bool:
    return bool(a.adding_replicas or a.removing_replicas)


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """Kafka's ReplicaAssignment.reassignTo: target first, then the replicas it leaves."""
    original = origin_replicas(current)
    replicas = tuple(dict.fromkeys([*target, *original]))
    return ReplicaAssignment(
        replicas,
        tuple(b for b in replicas if b not in original),
        tuple(b for b in replicas if b not in target),
    )


def validate_replicas(replicas: Sequence[int], current: ReplicaAssignment, live: set[int]) -> Result | None:
    """Kafka's validateReplicas: None when the target may be used."""
    bad = int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if not replicas:
        return bad, "Empty replica list specified in partition reassignment."
    if len(set(replicas)) != len(replicas):
        return bad, f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}"
    if any(b < 0 for b in replicas):
        return bad, f"Invalid broker id in replica list: {list(replicas)}"
    adding = reassign_to(current, replicas).adding_replicas
    if not set(adding) <= live:
        return bad, (f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                     f"live broker list: {sorted(live)}")  # fmt: skip
    return None


class ReassignmentManager:
    def __init__(self, controller: ControllerHost) -> None:
        self.c = controller
        self.being_reassigned: set[TopicPartition] = set()
        self._znode_seen: dict[TopicPartition, tuple[int, ...]] = {}

    def reset(self) -> None:
        self.being_reassigned.clear()
        self._znode_seen.clear()

    # --- what starts a move -------------------------------------------------------------------

    async def on_failover(self) -> None:
        """Kafka's initializePartitionReassignments: the tool's requests, then the moves found
        half-done in ``/brokers/topics``."""
        ctx = self.c.context
        self.being_reassigned = {tp for tp, a in ctx.assignments.items() if is_being_reassigned(a)}
        resumed = await self.on_znode_change()
        for tp in sorted(self.being_reassigned - resumed):
            await self.on_partition_reassignment(tp, ctx.assignments[tp])

    async def on_znode_change(self) -> set[TopicPartition]:
        """Kafka's processZkPartitionReassignment: entries of ``/admin/reassign_partitions``
        not seen before start (a new target for a moving partition supersedes its move);
        those that cannot are dropped from the znode. Returns the partitions started."""
        c, ctx = self.c, self.c.context
        if not c.is_active:
            return set()
        asked = await c.call(c.zk.get_reassignment, c.watch(self._znode_event))
        new = {tp: r for tp, r in asked.items() if self._znode_seen.get(tp) != r}
        self._znode_seen = dict(asked)
        failed: set[TopicPartition] = set()
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in new.items():
            current = ctx.assignments.get(tp)
            if current is None or not target or len(set(target)) != len(target):
                log.warning("ignoring the reassignment of %s to %s", tp, list(target))
                failed.add(tp)
            else:
                todo[tp] = reassign_to(current, target)
        results = await self.trigger(todo)
        failed |= {tp for tp, (code, _) in results.items() if code}
        if failed:
            await self.remove_from_znode(lambda tp, _r: tp in failed)
        return {tp for tp, (code, _) in results.items() if not code}

    async def _znode_event(self) -> None:
        await self.on_znode_change()

    async def alter(self, asked: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, Result]:
        """Kafka's processApiPartitionReassignment (None cancels)."""
        ctx = self.c.context
        out: dict[TopicPartition, Result] = {}
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in asked.items():
            current = ctx.assignments.get(tp)
            if current is None:
                out[tp] = NO_PARTITION
                continue
            error = None if target is None else validate_replicas(target, current, ctx.live_broker_ids())
            if error is not None:
                out[tp] = error
            elif target is not None:
                todo[tp] = reassign_to(current, target)
            elif is_being_reassigned(current):
                todo[tp] = reassign_to(current, origin_replicas(current))
            else:
                out[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), "No ongoing reassignment for this partition.")
        # the latest request wins over a tool's
        await self.remove_from_znode(lambda tp, _r: tp in todo)
        out.update(await self.trigger(todo))
        return out

    def list(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        ctx = self.c.context
        asked = sorted(self.being_reassigned) if partitions is None else partitions
        found = {tp: ctx.assignments.get(tp) for tp in asked}
        return {tp: a for tp, a in found.items() if a is not None and is_being_reassigned(a)}

    async def trigger(self, todo: Mapping[TopicPartition, ReplicaAssignment]) -> dict[TopicPartition, Result]:
        """Kafka's maybeTriggerPartitionReassignment."""
        ctx = self.c.context
        out: dict[TopicPartition, Result] = {}
        for tp, reassignment in todo.items():
            if tp.topic in ctx.topics_to_be_deleted or tp not in ctx.assignments:
                out[tp] = NO_PARTITION
                continue
            await self.on_partition_reassignment(tp, reassignment)
            out[tp] = (int(ErrorCode.NONE), None)
        return out

    async def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's processPartitionReassignmentIsrChange: a move whose targets are all in the
        ISR now completes."""
        ctx = self.c.context
        for tp in partitions:
            if tp not in self.being_reassigned:
                continue
            a = ctx.assignments.get(tp)
            if a is None or not is_being_reassigned(a):  # its topic was deleted meanwhile
                self.being_reassigned.discard(tp)
            elif self._is_complete(tp, a):
                await self.on_partition_reassignment(tp, a)

    # --- the move -----------------------------------------------------------------------------

    def _is_complete(self, tp: TopicPartition, a: ReplicaAssignment) -> bool:
        if not is_being_reassigned(a):
            return True
        state = self.c.context.leadership.get(tp)
        return state is not None and set(target_replicas(a)) <= set(state.isr)

    async def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        await self._update_current(tp, reassignment)
        if not self._is_complete(tp, reassignment):
            await self._bump_epoch(tp)  # A1/A2: every replica (the new ones too) learns RS
            log.info("controller %d: %s moving to %s (adding %s, removing %s)", self.c.broker_id, tp,
                     list(target_replicas(reassignment)), list(reassignment.adding_replicas),
                     list(reassignment.removing_replicas))  # fmt: skip
        else:
            await self._complete(tp, reassignment)

    async def _update_current(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        current = self.c.context.assignments[tp]
        if current != reassignment:
            await self._write_assignment(tp, reassignment)
            unneeded = [b for b in current.replicas if b not in reassignment.replicas]
            if unneeded:
                await self._stop_removed_replicas(tp, unneeded)
        self.being_reassigned.add(tp)

    async def _bump_epoch(self, tp: TopicPartition) -> None:
        """Kafka's updateLeaderEpochAndSendRequest: the same leader and ISR at a new epoch,
        LeaderAndIsr to the live replicas of the current assignment."""
        c = self.c
        batch = c.batch()

        def bump(_tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch:
            return s.new_leader_and_isr(s.leader, s.isr)

        await c.partitions.update([tp], bump, batch)
        c.send(batch)

    async def _complete(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        c, ctx = self.c, self.c.context
        target = target_replicas(reassignment)
        completed = ReplicaAssignment(target)
        ctx.assignments[tp] = completed  # B2: in memory first, so requests carry the target
        await self._move_leader_if_required(tp, target)  # B3
        await self._stop_removed_replicas(tp, reassignment.removing_replicas)  # B4, B5
        await self._write_assignment(tp, completed)  # B6
        self.being_reassigned.discard(tp)  # B7
        await self.remove_from_znode(lambda p, r: p == tp and tuple(r) == target)
        batch = c.batch()
        batch.add_update_metadata(ctx.live_or_shutting_down(), [tp])  # B8
        c.send(batch)
        log.info("controller %d: %s reassigned to %s", c.broker_id, tp, list(target))

    async def _move_leader_if_required(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        c, ctx = self.c, self.c.context
        state = ctx.leadership.get(tp)
        if state is None:
            return
        if state.leader in target and state.leader in ctx.online_replicas(tp):
            await self._bump_epoch(tp)
            return
        batch = c.batch()

        def elect(_tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            return election.elect_for_reassignment(s, target, ctx.online_replicas(tp), ctx.epoch)

        await c.partitions.update([tp], elect, batch)
        c.send(batch)

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        """OfflineReplica (out of the ISR), then ReplicaDeletionStarted (StopReplica delete)."""
        c, ctx = self.c, self.c.context
        batch = c.batch()
        for b in removed:
            await c.partitions.remove_replica_from_isr(b, [tp], batch)
            if b in ctx.live_brokers:
                batch.add_stop_replica(b, tp, delete=True)
        c.send(batch)

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

    async def remove_from_znode(self, drop: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        """Kafka's maybeRemoveFromZkReassignment; the last entry deletes the znode."""
        c, ctx = self.c, self.c.context
        asked = await c.call(c.zk.get_reassignment)
        left = {tp: r for tp, r in asked.items() if not drop(tp, r)}
        if left == asked:
            return
        self._znode_seen = dict(left)
        if not left:
            await c.call(c.zk.delete_reassignment, ctx.epoch_zk_version)
        else:
            await c.call(c.zk.set_reassignment, left, ctx.epoch_zk_version)
