"""Topic deletion (Kafka's TopicDeletionManager).

A topic named under ``/admin/delete_topics`` (by DeleteTopics or a tool) is deleted on every
replica with StopReplica(delete=true); a replica on a broker that is down is deleted when
that broker returns. Once every replica has acknowledged, the topic's znodes go
(``/brokers/topics/<t>`` with its partition states, ``/config/topics/<t>``) and finally the
request znode.
"""

from __future__ import annotations

import logging

from tidelog.util.topic_partition import TopicPartition

from .context import ControllerResponse
from .host import ControllerHost

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, controller: ControllerHost) -> None:
        self.c = controller

    async def on_deletion_request(self) -> None:
        c, ctx = self.c, self.c.context
        topics = await c.call(c.zk.get_topic_deletions, c.watch(c.topic_deletion))
        unknown = [t for t in topics if t not in ctx.topic_ids]
        if not c.config.delete_topic_enable:
            unknown = list(topics)  # Kafka drops the requests when deletion is disabled
        if unknown:
            await c.call(c.zk.delete_topic_deletions, unknown, ctx.epoch_zk_version)
        for topic in topics:
            known = topic in ctx.topic_ids and c.config.delete_topic_enable
            if known and topic not in ctx.topics_to_be_deleted:
                ctx.topics_to_be_deleted.add(topic)
                ctx.replicas_to_delete[topic] = {
                    (tp, b) for tp in ctx.partitions_of(topic) for b in ctx.replicas(tp)
                }
        await self.resume()

    async def resume(self) -> None:
        """Send StopReplica(delete) for every pending replica on a live broker; finish topics
        with nothing left."""
        c, ctx = self.c, self.c.context
        if not ctx.topics_to_be_deleted:
            return
        batch = c.batch()
        batch.stop_replica_callback = self._on_stop_replica_response
        # brokers learn the topic is going (leader -2) before the replicas stop
        tps = [tp for t in ctx.topics_to_be_deleted for tp in ctx.partitions_of(t)]
        batch.add_update_metadata(ctx.live_or_shutting_down(), tps)
        for topic in sorted(ctx.topics_to_be_deleted):
            for tp, b in sorted(ctx.replicas_to_delete.get(topic, set())):
                if b in ctx.live_brokers:
                    batch.add_stop_replica(b, tp, delete=True)
        c.send(batch)
        for topic in sorted(ctx.topics_to_be_deleted):
            if not ctx.replicas_to_delete.get(topic):
                await self._complete(topic)

    def _on_stop_replica_response(self, broker_id: int, response: ControllerResponse) -> None:
        self.c.put(lambda: self._stop_replica_done(broker_id, response))

    async def _stop_replica_done(self, broker_id: int, response: ControllerResponse) -> None:
        ctx = self.c.context
        if response.error_code != 0:
            log.warning("StopReplica to broker %d failed: error %d", broker_id, response.error_code)
            return
        finished: set[str] = set()
        for tp, err in response.partition_errors.items():
            pending = ctx.replicas_to_delete.get(tp.topic)
            if pending is not None and err == 0:
                pending.discard((tp, broker_id))
                if not pending:
                    finished.add(tp.topic)
        for topic in sorted(finished):
            if topic in ctx.topics_to_be_deleted:
                await self._complete(topic)

    async def _complete(self, topic: str) -> None:
        c, ctx = self.c, self.c.context
        log.info("controller %d: topic %s deleted", c.broker_id, topic)
        tps: list[TopicPartition] = ctx.partitions_of(topic)
        await c.call(c.zk.delete_topic_znodes, topic, ctx.epoch_zk_version)
        await c.call(c.zk.delete_topic_deletions, [topic], ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        del tps
