"""Failed log dirs (Kafka's KafkaController.processLogDirEventNotification,
onBrokerLogDirFailure, processLeaderAndIsrResponseReceived and onReplicasBecomeOffline).

A broker whose log dir failed writes ``/log_dir_event_notification/log_dir_event_<seq>``.
The controller reads the brokers named, deletes the notifications and sends each of those
brokers a LeaderAndIsr for every replica it hosts (the OnlineReplica transition). The broker
answers KAFKA_STORAGE_ERROR for the replicas on its offline dirs: they become the broker's
``replicas_on_offline_dirs`` (every LeaderAndIsr answer is read so, as Kafka reads them: a
new controller, whose first LeaderAndIsr reach every replica, learns them too). For those
newly offline, partitions they led elect a leader among
the other online ISR members (none: the partition goes offline, leader -1), the replica
leaves its ISRs, and every broker learns it as an offline replica (UpdateMetadata).
"""

from __future__ import annotations

import logging

from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk.data import LeaderIsrAndControllerEpoch
from tidelog.util.topic_partition import TopicPartition

from . import election
from .context import OFFLINE_PARTITION, ControllerResponse, LeaderAndIsrRequestData
from .host import ControllerHost

log = logging.getLogger(__name__)


class LogDirEventManager:
    def __init__(self, controller: ControllerHost) -> None:
        self.c = controller

    async def on_notification(self) -> None:
        """The event of ``/log_dir_event_notification``'s watch (and of a new controller)."""
        c = self.c
        if not c.is_active:
            return
        notices = await c.call(c.zk.get_log_dir_event_notifications, c.watch(self.on_notification))
        try:
            brokers = sorted(set(notices.values()))
            if brokers:
                log.info("controller %d: handling log directory failure for brokers %s",
                         c.broker_id, brokers)  # fmt: skip
                self.ask_brokers(brokers)
        finally:
            await c.call(c.zk.delete_log_dir_event_notifications, list(notices),
                         c.context.epoch_zk_version)  # fmt: skip

    def ask_brokers(self, broker_ids: list[int]) -> None:
        """LeaderAndIsr for every replica on these brokers, at the partitions' current
        state; the answers say which replicas are offline."""
        c, ctx = self.c, self.c.context
        live = tuple(ctx.live_brokers[b] for b in sorted(ctx.live_brokers))
        for b in broker_ids:
            if b not in ctx.live_brokers or c.channel is None:
                continue
            infos = tuple(
                info for tp in ctx.partitions_on_broker(b)
                if tp.topic not in ctx.topics_to_be_deleted
                and (info := ctx.partition_info(tp)) is not None
            )  # fmt: skip
            if not infos:
                continue
            leaders = {i.state.leader for i in infos}
            request = LeaderAndIsrRequestData(
                c.broker_id, ctx.epoch, ctx.broker_epoch(b), infos,
                tuple(r for r in live if r.broker_id in leaders))  # fmt: skip
            c.channel.send(b, request, self.on_response)

    def on_response(self, broker_id: int, response: ControllerResponse) -> None:
        """Every LeaderAndIsr answer (Kafka's LeaderAndIsrResponseReceived event)."""
        async def event() -> None:
            await self.on_leader_and_isr_response(broker_id, response)

        self.c.put(event)

    async def on_leader_and_isr_response(self, broker_id: int, response: ControllerResponse) -> None:
        c, ctx = self.c, self.c.context
        if not c.is_active:
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("controller %d: error %d in LeaderAndIsr response from broker %d",
                      c.broker_id, response.error_code, broker_id)  # fmt: skip
            return
        errors = response.partition_errors
        offline = {tp for tp, e in errors.items() if e == ErrorCode.KAFKA_STORAGE_ERROR}
        online = {tp for tp, e in errors.items() if e == ErrorCode.NONE}
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - online) | offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        new = sorted(current - previous)
        if new:
            log.info("controller %d: marking replicas %s on broker %d as offline",
                     c.broker_id, new[:20], broker_id)  # fmt: skip
            await self.on_replicas_become_offline(broker_id, new)

    async def on_replicas_become_offline(self, broker_id: int, tps: list[TopicPartition]) -> None:
        """New leaders for the partitions the offline replicas led, then the replicas leave
        their ISRs; everyone learns the offline replicas."""
        c, ctx = self.c, self.c.context
        tps = [tp for tp in tps if tp in ctx.leadership and tp.topic not in ctx.topics_to_be_deleted]
        batch = c.batch()
        led = [tp for tp in tps if ctx.leadership[tp].leader == broker_id]
        for tp in led:
            ctx.partition_states[tp] = OFFLINE_PARTITION
        await c.refresh_topic_configs({tp.topic for tp in led})

        def elect(tp: TopicPartition, s: LeaderIsrAndControllerEpoch) -> LeaderIsrAndControllerEpoch | None:
            return election.elect_for_offline(s, ctx.replicas(tp), ctx.online_replicas(tp),
                                              c.unclean_enabled(tp.topic), ctx.epoch)  # fmt: skip

        await c.partitions.update(led, elect, batch)
        await c.partitions.remove_replica_from_isr(broker_id, tps, batch)
        batch.add_update_metadata(ctx.live_or_shutting_down(), tps)
        c.send(batch)
