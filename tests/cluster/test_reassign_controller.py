"""The controller's reassignment steps (Kafka's onPartitionReassignment) on a real ZooKeeper,
brokers being registrations and the channel recording what would be sent: a move bumps the
leader epoch and tells every replica the full set; a newer target supersedes it (replicas
no longer wanted are deleted at once); the move completes when the targets are in the ISR."""

from __future__ import annotations

import asyncio
import uuid

from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.broker_requests import AlterPartitionItem
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.zk import data as z
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("m", 0)


def _deleted(channel: RecordingChannel, broker: int) -> bool:
    return any(b == broker and r.partitions.get(TP) == (-2, True) for b, r in channel.stop_replica())


def test_move_superseded_then_completed(zookeeper_connect: str) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        others = [register(zookeeper_connect, b) for b in (2, 3, 4)]
        channel = RecordingChannel()
        c = KafkaController(1, zk1, lambda: channel, ControllerConfig(auto_leader_rebalance_enable=False))
        await c.startup()
        await until(lambda: c.is_active)
        zk1.create_topic(TP.topic, uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))}, {})
        await until(lambda: TP in zk1.get_topic_partition_states([TP]))
        before = zk1.get_topic_partition_states([TP])[TP]

        assert await c.alter_partition_reassignments({TP: (3, 4)}) == {TP: (0, None)}
        moving = z.ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
        assert c.context.assignments[TP] == moving
        assert zk1.get_topic_assignment(TP.topic)[0].partitions[0] == moving  # type: ignore[index]
        state = zk1.get_topic_partition_states([TP])[TP]
        assert (state.leader, state.leader_epoch, state.isr) == (1, before.leader_epoch + 1, before.isr)
        for b in (1, 2, 3, 4):  # every replica learns the full set at the new epoch
            sent = channel.last_state_sent(b, TP)
            assert sent is not None and sent.leader_epoch == state.leader_epoch
        assert await c.list_partition_reassignments(None) == {TP: moving}

        # a newer target: 4 is no longer wanted and is deleted at once
        assert await c.alter_partition_reassignments({TP: (1, 3)}) == {TP: (0, None)}
        assert c.context.assignments[TP] == z.ReplicaAssignment((1, 3, 2), (3,), (2,))
        await until(lambda: _deleted(channel, 4), what="the superseded replica deleted")
        assert not _deleted(channel, 2)

        # the leader reports 3 in the ISR: the move completes, 2 leaves and is deleted
        cur = zk1.get_topic_partition_states([TP])[TP]
        _, out = await c.alter_partition(1, zk1.get_broker(1).epoch,  # type: ignore[union-attr]
                                         [AlterPartitionItem(TP, cur.leader_epoch, (1, 2, 3), cur.zk_version)])
        assert out[TP].error_code == ErrorCode.NONE
        assert c.context.assignments[TP] == z.ReplicaAssignment((1, 3))
        final = zk1.get_topic_partition_states([TP])[TP]
        assert final.leader == 1 and sorted(final.isr) == [1, 3] and final.leader_epoch > cur.leader_epoch
        await until(lambda: _deleted(channel, 2), what="the removed replica deleted")
        assert await c.list_partition_reassignments(None) == {}
        # nothing to cancel now
        assert (await c.alter_partition_reassignments({TP: None}))[TP][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        await c.shutdown()
        for zk in (zk1, *others):
            zk.close()

    asyncio.run(main())
