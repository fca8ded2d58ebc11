"""Partition and replica state changes (Kafka's PartitionStateMachine and the ISR side of its
ReplicaStateMachine): each writes ZooKeeper first, fenced by the controller epoch and the
partition's zkVersion, then updates the context and queues the brokers' requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from tidelog.server.zk.data import NO_LEADER, LeaderIsrAndControllerEpoch
from tidelog.util.topic_partition import TopicPartition

from . import election
from .context import (
    NEW_PARTITION,
    OFFLINE_PARTITION,
    ONLINE_PARTITION,
    ControllerContext,
    RequestBatch,
)

if TYPE_CHECKING:  # a type only: kazoo loads with the controller, not with this module
    from tidelog.server.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

T = TypeVar("T")
Elect = Callable[[TopicPartition, LeaderIsrAndControllerEpoch], LeaderIsrAndControllerEpoch | None]

MAX_WRITE_ATTEMPTS = 5


class PartitionStateMachine:
    def __init__(
        self,
        zk: KafkaZkClient,
        context: ControllerContext,
        unclean_enabled: Callable[[str], bool],
    ) -> None:
        self.zk = zk
        self.context = context
        self.unclean_enabled = unclean_enabled
        self.stats = election.ControllerStats()

    async def _zk(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.to_thread(fn, *args)

    # --- new partitions ----------------------------------------------------------------------

    async def initialize_new(self, partitions: Iterable[TopicPartition], batch: RequestBatch) -> None:
        """NewPartition -> OnlinePartition: the first live replica leads, the live replicas
        are the ISR (a partition with no live replica stays New until one comes)."""
        ctx = self.context
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            ctx.partition_states.setdefault(tp, NEW_PARTITION)
            online = ctx.online_replicas(tp)
            replicas = [b for b in ctx.replicas(tp) if b in online]
            if not replicas:
                log.warning("no live replica of new partition %s among %s", tp, ctx.replicas(tp))
                continue
            states[tp] = LeaderIsrAndControllerEpoch(replicas[0], 0, tuple(replicas), ctx.epoch)
        if not states:
            return
        results = await self._zk(self.zk.create_topic_partition_states, states, ctx.epoch_zk_version)
        existing = [tp for tp, err in results.items() if err is not None]
        for tp, err in results.items():
            if err is None:
                ctx.leadership[tp] = states[tp]
                ctx.partition_states[tp] = ONLINE_PARTITION
                batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)
        if existing:  # written before (a controller that died half-way): read and use them
            read = await self._zk(self.zk.get_topic_partition_states, existing)
            ctx.leadership.update(read)
            for tp in read:
                ctx.partition_states[tp] = OFFLINE_PARTITION
            await self.elect_offline(list(read), batch)

    # --- elections ---------------------------------------------------------------------------

    async def elect_offline(
        self, partitions: Iterable[TopicPartition], batch: RequestBatch, *, allow_unclean: bool = False
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Offline/New partitions whose leader is gone get one (OfflinePartitionLeaderElection,
        unclean when the topic allows it or ``allow_unclean``: ElectLeaders UNCLEAN), and so
        does an offline partition whose recorded leader came back (its sole ISR member: it
        leads again at a new epoch, so every replica hears where it is now); partitions led
        by a live broker are left alone. Returns the elected states."""
        ctx = self.context
        todo = [
            tp for tp in partitions
            if tp in ctx.leadership and tp.topic not in ctx.topics_to_be_deleted
            and (ctx.leadership[tp].leader not in ctx.online_replicas(tp)
                 or ctx.partition_states.get(tp) == OFFLINE_PARTITION)
        ]  # fmt: skip
        if not todo:
            return {}
        unclean = {t: allow_unclean or self.unclean_enabled(t) for t in {tp.topic for tp in todo}}
        from_outside_isr: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}

        def elect(tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            online = ctx.online_replicas(tp)
            new = election.elect_for_offline(s, ctx.replicas(tp), online, unclean[tp.topic], ctx.epoch)
            from_outside_isr.pop(tp, None)
            if new is not None and election.is_unclean(s, new):
                from_outside_isr[tp] = s
            return new

        done = await self.update(todo, elect, batch)
        for tp in todo:
            if tp not in done:  # nobody qualifies: offline until an ISR member returns
                ctx.partition_states[tp] = OFFLINE_PARTITION
        unclean_done = [tp for tp in from_outside_isr if tp in done]
        for tp in unclean_done:
            old = from_outside_isr[tp]
            log.warning("Unclean leader election: %s has leader %d at epoch %d, from outside "
                        "its ISR %s (records not on the new leader are lost)",
                        tp, done[tp].leader, done[tp].leader_epoch, list(old.isr))  # fmt: skip
        self.stats.record_unclean_elections(len(unclean_done))
        return done

    async def update(
        self, partitions: Iterable[TopicPartition], compute: Elect, batch: RequestBatch
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Write ``compute(tp, current)`` for each partition at the current zkVersion; a stale
        version re-reads the state and computes again. Committed states go into the context,
        with LeaderAndIsr to the partition's live replicas and UpdateMetadata to all."""
        ctx = self.context
        pending = list(partitions)
        done: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for _ in range(MAX_WRITE_ATTEMPTS):
            new: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
            for tp in pending:
                cur = ctx.leadership.get(tp)
                nxt = compute(tp, cur) if cur is not None else None
                if nxt is not None:
                    new[tp] = LeaderIsrAndControllerEpoch(
                        nxt.leader, nxt.leader_epoch, nxt.isr, ctx.epoch,
                        nxt.leader_recovery_state, cur.zk_version if cur else 0,
                    )  # fmt: skip
            if not new:
                break
            result = await self._zk(self.zk.update_leader_and_isr, new, ctx.epoch_zk_version)
            for tp, state in result.finished.items():
                ctx.leadership[tp] = state
                if state.leader != NO_LEADER:
                    ctx.partition_states[tp] = ONLINE_PARTITION
                done[tp] = state
                batch.add_leader_and_isr(
                    [b for b in ctx.replicas(tp) if b in ctx.live_or_shutting_down()], tp
                )
            for tp, err in result.failed.items():
                log.error("could not write the state of %s: %r", tp, err)
            if not result.bad_version:
                break
            read = await self._zk(self.zk.get_topic_partition_states, result.bad_version)
            for tp, state in read.items():
                if state.controller_epoch > ctx.epoch:
                    raise RuntimeError(f"{tp} was written by a newer controller")
                ctx.leadership[tp] = state
            pending = sorted(read)
        return done

    async def remove_replica_from_isr(
        self, broker_id: int, partitions: Iterable[TopicPartition], batch: RequestBatch
    ) -> None:
        """OfflineReplica: the broker leaves the ISR; if it led, the partition has no leader
        (Kafka's removeReplicasFromIsr: leader -1 when the leader itself goes)."""

        def shrink(_tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            if broker_id not in s.isr and s.leader != broker_id:
                return None
            leader = NO_LEADER if s.leader == broker_id else s.leader
            # the last ISR member stays recorded (Kafka keeps it so it can lead again)
            isr = [b for b in s.isr if b != broker_id] if len(s.isr) > 1 else list(s.isr)
            if leader == s.leader and tuple(isr) == s.isr:
                return None  # already offline (its last ISR member, no leader): no new epoch
            return s.new_leader_and_isr(leader, isr)

        await self.update(partitions, shrink, batch)
        for tp in partitions:
            s = self.context.leadership.get(tp)
            if s is not None and s.leader == NO_LEADER:
                self.context.partition_states[tp] = OFFLINE_PARTITION

    async def remove_dead_replicas(self, batch: RequestBatch) -> list[int]:
        """The OfflineReplica step of Kafka's ReplicaStateMachine.startup, at controller
        failover: every replica on a broker that is not alive leaves its partition's ISR
        (the brokers that died while no controller watched, the last one among them
        usually the previous controller; without this the surviving leaders would wait for
        them until their own ``replica.lag.time.max.ms`` check). Returns those brokers."""
        ctx = self.context
        live = ctx.live_broker_ids()
        dead = sorted({b for a in ctx.assignments.values() for b in a.replicas if b not in live})
        for b in dead:
            hosted = [tp for tp in ctx.partitions_on_broker(b)
                      if tp in ctx.leadership and tp.topic not in ctx.topics_to_be_deleted]  # fmt: skip
            await self.remove_replica_from_isr(b, hosted, batch)
        return dead


def leaders_summary(elected: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], per_broker: int = 10) -> str:
    """``broker 2 leads t-0, t-3; broker 3 leads t-1`` (at most ``per_broker`` partitions
    named for each, then how many more)."""
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp, s in sorted(elected.items()):
        by_leader.setdefault(s.leader, []).append(tp)
    parts = []
    for leader, tps in sorted(by_leader.items()):
        named = ", ".join(str(tp) for tp in tps[:per_broker])
        more = f" (+{len(tps) - per_broker} more)" if len(tps) > per_broker else ""
        parts.append(f"broker {leader} leads {named}{more}")
    return "; ".join(parts)
