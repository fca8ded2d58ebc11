"""The controller (Kafka's KafkaController in ZooKeeper mode).

Every broker runs one; the one that creates ``/controller`` first is active. All work is
events on one asyncio queue drained by one task (Kafka's ControllerEventManager): ZooKeeper
watches (fired on kazoo's thread, queued with ``call_soon_threadsafe``), requests from
brokers (ControlledShutdown, AlterPartition, ElectLeaders) and timers. A ZooKeeper write
refused because ``/controller_epoch`` moved on means another broker leads now: this one
resigns at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk import data as z
from tidelog.server.zk.client import ControllerMovedError, KafkaZkClient
from tidelog.util.topic_partition import TopicPartition

from . import broker_requests, election
from .context import (
    NEW_PARTITION,
    OFFLINE_PARTITION,
    ONLINE_PARTITION,
    ControllerChannel,
    ControllerContext,
    RequestBatch,
)
from .deletion import TopicDeletionManager
from .host import Event
from .log_dir_events import LogDirEventManager
from .partitions import PartitionStateMachine, leaders_summary
from .reassignment import ReassignmentManager

log = logging.getLogger(__name__)

T = TypeVar("T")
SHUTDOWN_WAIT_S = 5.0


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller reads (Kafka's names)."""

    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True


class KafkaController:
    def __init__(
        self,
        broker_id: int,
        zk: KafkaZkClient,
        channel_factory: Callable[[], ControllerChannel],
        config: ControllerConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel_factory = channel_factory
        self.config = config or ControllerConfig()
        self.context = ControllerContext()
        self.active_controller_id = -1
        self.channel: ControllerChannel | None = None
        self.partitions = PartitionStateMachine(zk, self.context, self.unclean_enabled)
        self.deletion = TopicDeletionManager(self)
        self.reassignment = ReassignmentManager(self)
        self.log_dir_events = LogDirEventManager(self)
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._watchers: dict[object, Callable[[Any], None]] = {}

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.channel is not None

    async def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=f"controller-{self.broker_id}")
        self.put(self._elect)

    async def shutdown(self) -> None:
        if self._task is None:
            return
        self._queue.put_nowait(None)
        # an event may wait on a ZooKeeper that is gone: give it a moment, then cut it off
        _, pending = await asyncio.wait({self._task}, timeout=SHUTDOWN_WAIT_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        await self._resign()

    def put(self, event: Event) -> None:
        self._queue.put_nowait(event)

    def put_threadsafe(self, event: Event) -> None:
        """Queue an event from another thread (kazoo's watch and state callbacks)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def watch(self, event: Event, key: object = None) -> Callable[[Any], None]:
        """The ZooKeeper watcher queuing ``event``: one object per event (and key), so that
        re-arming a watch that is still set does not add a second watcher (kazoo keeps a
        set of watcher functions per path)."""
        k = (event, key) if key is not None else event
        watcher = self._watchers.get(k)
        if watcher is None:
            watcher = self._watchers[k] = lambda _watched: self.put_threadsafe(event)
        return watcher

    async def _run(self) -> None:
        while (event := await self._queue.get()) is not None:
            try:
                await event()
            except ControllerMovedError:
                log.info("controller %d: the epoch moved on, resigning", self.broker_id)
                await self._resign()
                self.put(self._elect)
            except Exception:
                log.exception("controller %d: event failed", self.broker_id)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """A blocking ZooKeeper call off the event loop."""
        return await asyncio.to_thread(fn, *args)

    def session_lost(self) -> None:
        """The ZooKeeper session expired: stop acting as controller now (thread-safe)."""
        self.put_threadsafe(self._resign)

    def session_reestablished(self) -> None:
        self.put_threadsafe(self._elect)

    # --- election -------------------------------------------------------------------------------

    async def _elect(self) -> None:
        current = await self.call(self.zk.get_controller_id, self.watch(self._controller_change))
        if current is not None:
            self.active_controller_id = current
            if current != self.broker_id and self.is_active:
                await self._resign()
            return
        try:
            epoch, version = await self.call(
                self.zk.register_controller_and_increment_controller_epoch, self.broker_id
            )
        except ControllerMovedError:
            winner = await self.call(self.zk.get_controller_id, self.watch(self._controller_change))
            self.active_controller_id = -1 if winner is None else winner
            return
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self.active_controller_id = self.broker_id
        self.context.epoch, self.context.epoch_zk_version = epoch, version
        await self._on_controller_failover()

    async def _controller_change(self) -> None:
        await self._elect()

    async def _resign(self) -> None:
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        channel, self.channel = self.channel, None
        if channel is not None:
            log.info("broker %d resigns as controller", self.broker_id)
            await channel.close()
        epoch, version = self.context.epoch, self.context.epoch_zk_version
        self.context.__init__()  # type: ignore[misc]  # forget everything but the epoch
        self.reassignment.reset()
        self.context.epoch, self.context.epoch_zk_version = epoch, version
        if self.active_controller_id == self.broker_id:
            self.active_controller_id = -1

    async def _on_controller_failover(self) -> None:
        ctx = self.context
        self.channel = self.channel_factory()
        brokers = await self.call(self.zk.get_all_brokers, self.watch(self._broker_change))
        ctx.live_brokers = dict(brokers)
        for reg in brokers.values():
            self.channel.add_broker(reg)
        topics = await self.call(self.zk.get_all_topics, self.watch(self._topic_change))
        await self._load_topics(topics)
        await self.call(self.zk.get_preferred_replica_election, self.watch(self._preferred_election_znode))
        stale = await self.call(self.zk.get_isr_change_notifications,
                                self.watch(self._isr_change_notification))  # fmt: skip
        await self.call(self.zk.delete_isr_change_notifications, list(stale), ctx.epoch_zk_version)
        batch = self.batch()
        # every live broker learns the brokers and all partitions first, then its replicas
        batch.add_update_metadata(ctx.live_broker_ids(), list(ctx.leadership))
        for tp, state in ctx.leadership.items():
            live = ctx.live_broker_ids()
            online = state.leader in ctx.online_replicas(tp)
            ctx.partition_states[tp] = ONLINE_PARTITION if online else OFFLINE_PARTITION
            batch.add_leader_and_isr([b for b in ctx.replicas(tp) if b in live], tp)
        await self._offline_replicas_at_failover(batch)
        self.send(batch)
        await self.deletion.on_deletion_request()  # deletions asked before this controller
        await self.reassignment.on_failover()
        await self._preferred_election_znode()
        await self.log_dir_events.on_notification()  # failed log dirs, also those told before
        if self.config.auto_leader_rebalance_enable:
            self._rebalance_task = asyncio.create_task(self._rebalance_timer())

    async def _offline_replicas_at_failover(self, batch: RequestBatch) -> None:
        """Kafka's ReplicaStateMachine and PartitionStateMachine startup: partitions whose
        leader is gone elect one from their ISR filtered by live brokers (one write), then
        every replica left on a broker that is not alive leaves its ISR."""
        elected = await self._online_partition_state_change(batch)
        dead = await self.partitions.remove_dead_replicas(batch)
        if dead:
            log.info("controller %d (epoch %d): brokers %s are not alive, their replicas go "
                     "offline", self.broker_id, self.context.epoch, dead)  # fmt: skip
        if elected:
            log.info("controller %d elected leaders at failover: %s", self.broker_id,
                     leaders_summary(elected))  # fmt: skip

    async def _load_topics(self, topics: Iterable[str]) -> list[TopicPartition]:
        """Read assignments and states of these topics into the context (giving a topic a
        tool wrote without an id one); returns partitions that have no state yet."""
        ctx, new = self.context, []
        for topic in topics:
            got = await self.call(self.zk.get_topic_assignment, topic, self._modification_watch(topic))
            if got is None:
                continue
            assignment, version = got
            topic_id = assignment.topic_id
            if topic_id is None:
                topic_id = uuid.uuid4()
                await self.call(self.zk.set_topic_assignment, topic, topic_id,
                                assignment.partitions, version, ctx.epoch_zk_version)  # fmt: skip
            ctx.topic_ids[topic] = topic_id
            tps = [TopicPartition(topic, p) for p in sorted(assignment.partitions)]
            for tp in tps:
                ctx.assignments[tp] = assignment.partitions[tp.partition]
            states = await self.call(self.zk.get_topic_partition_states, tps)
            ctx.leadership.update(states)
            for tp in tps:
                if tp not in states:
                    ctx.partition_states[tp] = NEW_PARTITION
                    new.append(tp)
        return new

    # --- brokers --------------------------------------------------------------------------------

    async def _broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = await self.call(self.zk.get_all_brokers, self.watch(self._broker_change))
        dead = [b for b in ctx.live_brokers if b not in current]
        bounced = [b for b, r in current.items() if b in ctx.live_brokers
                   and r.epoch != ctx.live_brokers[b].epoch]  # fmt: skip
        new = [b for b in current if b not in ctx.live_brokers]
        if dead or bounced:
            await self._on_broker_failure(dead + bounced)
        for b in bounced + new:
            ctx.live_brokers[b] = current[b]
            assert self.channel is not None
            self.channel.add_broker(current[b])
        if bounced or new:
            await self._on_broker_startup(bounced + new)

    async def _on_broker_failure(self, broker_ids: list[int]) -> None:
        ctx = self.context
        log.info("controller %d: brokers %s failed", self.broker_id, broker_ids)
        for b in broker_ids:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down_broker_ids.discard(b)
            ctx.replicas_on_offline_dirs.pop(b, None)  # a broker back has its dirs back
            if self.channel is not None:
                self.channel.remove_broker(b)
        batch = self.batch()
        led = [tp for tp, s in ctx.leadership.items() if s.leader in broker_ids]
        for tp in led:
            ctx.partition_states[tp] = OFFLINE_PARTITION
        await self._online_partition_state_change(batch)
        for b in broker_ids:
            hosted = [tp for tp in ctx.partitions_on_broker(b) if tp.topic not in ctx.topics_to_be_deleted]
            await self.partitions.remove_replica_from_isr(b, hosted, batch)
        # everyone learns who is gone even when no partition changed
        batch.add_update_metadata(ctx.live_broker_ids(), [])
        self.send(batch)

    async def _on_broker_startup(self, broker_ids: list[int]) -> None:
        ctx = self.context
        log.info("controller %d: brokers %s started", self.broker_id, broker_ids)
        batch = self.batch()
        batch.add_update_metadata(ctx.live_broker_ids(), list(ctx.leadership))
        for b in broker_ids:
            for tp in ctx.partitions_on_broker(b):
                if tp in ctx.leadership and tp.topic not in ctx.topics_to_be_deleted:
                    batch.add_leader_and_isr([b], tp)
        await self._online_partition_state_change(batch)
        self.send(batch)
        await self.deletion.resume()

    async def _online_partition_state_change(
        self, batch: RequestBatch
    ) -> dict[TopicPartition, z.LeaderIsrAndControllerEpoch]:
        """Kafka's triggerOnlinePartitionStateChange: New partitions are initialised, Offline
        ones elect a leader (returned)."""
        ctx = self.context
        new = [tp for tp, s in ctx.partition_states.items()
               if s == NEW_PARTITION and tp not in ctx.leadership]  # fmt: skip
        await self.partitions.initialize_new(new, batch)
        offline = [tp for tp, s in ctx.partition_states.items() if s in (OFFLINE_PARTITION, NEW_PARTITION)]
        # unclean.leader.election.enable may be a topic override: read it as it is now
        await self.refresh_topic_configs({tp.topic for tp in offline
                                          if ctx.leadership.get(tp) is not None})  # fmt: skip
        return await self.partitions.elect_offline(offline, batch)

    # --- topics ---------------------------------------------------------------------------------

    async def _topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        topics = set(await self.call(self.zk.get_all_topics, self.watch(self._topic_change)))
        for gone in ctx.all_topics() - topics:  # removed behind our back
            ctx.remove_topic(gone)
        new = await self._load_topics(sorted(topics - ctx.all_topics()))
        batch = self.batch()
        await self.partitions.initialize_new(new, batch)
        self.send(batch)

    async def _partition_modification(self, topic: str) -> None:
        """Partitions added to ``/brokers/topics/<t>`` (CreatePartitions, or a tool)."""
        ctx = self.context
        if not self.is_active or topic not in ctx.topic_ids:
            return
        got = await self.call(self.zk.get_topic_assignment, topic, self._modification_watch(topic))
        if got is None:
            return
        added = [TopicPartition(topic, p) for p in sorted(got[0].partitions)
                 if TopicPartition(topic, p) not in ctx.assignments]  # fmt: skip
        for tp in added:
            ctx.assignments[tp] = got[0].partitions[tp.partition]
            ctx.partition_states[tp] = NEW_PARTITION
        if added:
            batch = self.batch()
            await self.partitions.initialize_new(added, batch)
            self.send(batch)

    def _modification_watch(self, topic: str) -> Callable[[Any], None]:
        key = ("modification", topic)
        watcher = self._watchers.get(key)
        if watcher is None:

            async def event() -> None:
                await self._partition_modification(topic)

            watcher = self._watchers[key] = self.watch(event)
        return watcher

    async def topic_deletion(self) -> None:
        if self.is_active:
            await self.deletion.on_deletion_request()

    def unclean_enabled(self, topic: str) -> bool:
        value = self._topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def set_default_unclean_leader_election(self, enabled: bool) -> None:
        """The broker's ``unclean.leader.election.enable`` changed dynamically; turned on, the
        offline partitions of topics without an override may elect now (Kafka's
        enableDefaultUncleanLeaderElection). Any thread."""
        self.config = replace(self.config, unclean_leader_election_enable=enabled)
        if enabled:
            self.enable_topic_unclean_leader_election(None)

    def enable_topic_unclean_leader_election(self, topic: str | None) -> None:
        """A topic's ``unclean.leader.election.enable`` (None: the broker's) became true:
        its offline partitions elect again (Kafka's TopicUncleanLeaderElectionEnable).
        Any thread."""

        async def event() -> None:
            ctx = self.context
            offline = [tp for tp, s in ctx.partition_states.items()
                       if s == OFFLINE_PARTITION and topic in (None, tp.topic)]  # fmt: skip
            if not self.is_active or not offline:
                return
            batch = self.batch()
            await self.refresh_topic_configs({tp.topic for tp in offline})
            await self.partitions.elect_offline(offline, batch)
            self.send(batch)

        self.put_threadsafe(event)  # from the loop or a ZooKeeper watch

    @property
    def unclean_leader_elections(self) -> int:
        """Kafka's ControllerStats UncleanLeaderElectionsPerSec, as a total."""
        return self.partitions.stats.unclean_leader_elections

    async def refresh_topic_configs(self, topics: Iterable[str]) -> None:
        for topic in topics:
            self._topic_configs[topic] = await self.call(self.zk.get_entity_configs, "topics", topic)

    async def _isr_change_notification(self) -> None:
        """A leader that wrote its partition's state znode itself (brokers before
        AlterPartition) announces it under ``/isr_change_notification``: read the states,
        tell every broker, delete the notices (Kafka's IsrChangeNotification)."""
        if not self.is_active:
            return
        ctx = self.context
        notices = await self.call(self.zk.get_isr_change_notifications,
                                  self.watch(self._isr_change_notification))  # fmt: skip
        tps = sorted({tp for parts in notices.values() for tp in parts if tp in ctx.assignments})
        if tps:
            ctx.leadership.update(await self.call(self.zk.get_topic_partition_states, tps))
            batch = self.batch()
            batch.add_update_metadata(ctx.live_or_shutting_down(), tps)
            self.send(batch)
            await self.reassignment.on_isr_change(tps)
        await self.call(self.zk.delete_isr_change_notifications, list(notices), ctx.epoch_zk_version)

    # --- preferred leaders ----------------------------------------------------------------------

    async def _preferred_election_znode(self) -> None:
        if not self.is_active:
            return
        watch = self.watch(self._preferred_election_znode)
        tps = await self.call(self.zk.get_preferred_replica_election, watch)
        if tps:
            await self.elect_preferred([tp for tp in tps if tp in self.context.leadership])
            await self.call(self.zk.delete_preferred_replica_election, self.context.epoch_zk_version)

    async def elect_preferred(self, tps: list[TopicPartition]) -> dict[TopicPartition, z.LeaderIsrAndControllerEpoch]:
        ctx = self.context
        batch = self.batch()

        def elect(tp: TopicPartition, s: z.LeaderIsrAndControllerEpoch) -> z.LeaderIsrAndControllerEpoch | None:
            if s.leader == ctx.replicas(tp)[0]:
                return None
            return election.elect_preferred(s, ctx.replicas(tp), ctx.online_replicas(tp), ctx.epoch)

        done = await self.partitions.update(tps, elect, batch)
        self.send(batch)
        return done

    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_seconds)
            self.put(self.check_leader_imbalance)

    async def check_leader_imbalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, the share of its
        partitions led by someone else; above the threshold, preferred elections."""
        ctx = self.context
        if not self.is_active:
            return
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, a in ctx.assignments.items():
            if a.replicas and tp in ctx.leadership and tp.topic not in ctx.topics_to_be_deleted:
                by_preferred.setdefault(a.replicas[0], []).append(tp)
        todo: list[TopicPartition] = []
        for broker, tps in by_preferred.items():
            not_led = [tp for tp in tps if ctx.leadership[tp].leader != broker]
            ratio = len(not_led) / len(tps)
            if ratio > self.config.leader_imbalance_per_broker_percentage / 100:
                # Kafka's canPreferredReplicaBeLeader
                todo += [tp for tp in not_led
                         if broker in ctx.online_replicas(tp) and broker in ctx.leadership[tp].isr]  # fmt: skip
        if todo:
            await self.elect_preferred(sorted(todo))

    # --- requests from brokers and admins (answered from the event queue) ------------------

    async def _submit(self, fn: Callable[[], Awaitable[T]], not_active: T) -> T:
        if not self.is_active:
            return not_active
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                result = await fn() if self.is_active else not_active
            except ControllerMovedError:
                # deposed while writing (Kafka's ControllerMovedException): the request is
                # answered NOT_CONTROLLER, and the event loop resigns
                if not done.done():
                    done.set_result(not_active)
                raise
            except BaseException as e:
                if not done.done():
                    done.set_exception(e)
                raise
            if not done.done():
                done.set_result(result)

        self.put(event)
        return await done

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[int, list[TopicPartition]]:
        """(error code, partitions the broker still leads)."""
        return await self._submit(
            lambda: broker_requests.controlled_shutdown(self, broker_id, broker_epoch),
            (int(ErrorCode.NOT_CONTROLLER), []),
        )

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: list[broker_requests.AlterPartitionItem]
    ) -> tuple[int, dict[TopicPartition, broker_requests.AlterPartitionResult]]:
        return await self._submit(
            lambda: broker_requests.alter_partition(self, broker_id, broker_epoch, items),
            (int(ErrorCode.NOT_CONTROLLER), {}),
        )

    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """ElectLeaders: PREFERRED (0) or UNCLEAN (1); None asks for every partition."""
        return await self._submit(
            lambda: broker_requests.elect_leaders(self, partitions, election_type),
            {tp: (int(ErrorCode.NOT_CONTROLLER), None) for tp in partitions or []},
        )

    async def alter_partition_reassignments(
        self, asked: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]] | None:
        """AlterPartitionReassignments (None cancels a move); None when not the controller."""
        return await self._submit(lambda: self._alter_reassignments(asked), None)

    async def _alter_reassignments(
        self, asked: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[int, str | None]] | None:
        return await self.reassignment.alter(asked)

    async def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, z.ReplicaAssignment] | None:
        """The moving partitions among these (None: all); None when not the controller."""

        async def listed() -> dict[TopicPartition, z.ReplicaAssignment] | None:
            return self.reassignment.list(partitions)

        return await self._submit(listed, None)

    # --- sending --------------------------------------------------------------------------------

    def batch(self) -> RequestBatch:
        batch = RequestBatch(self.broker_id, self.context)
        batch.leader_and_isr_callback = self.log_dir_events.on_response  # Kafka's LeaderAndIsrResponseReceived
        return batch

    def send(self, batch: RequestBatch) -> None:
        if self.channel is not None:
            batch.send_to_brokers(self.channel)

    # metrics (Kafka's KafkaController gauges)
    @property
    def active_controller_count(self) -> int:
        return 1 if self.is_active else 0

    @property
    def offline_partitions_count(self) -> int:
        return self.context.offline_partition_count() if self.is_active else 0

    @property
    def global_topic_count(self) -> int:
        return len(self.context.topic_ids) if self.is_active else 0

    @property
    def global_partition_count(self) -> int:
        return len(self.context.assignments) if self.is_active else 0

