"""The controller against a real ZooKeeper (brokers seen through a recording channel): a
replica a broker reported on a failed log dir (KAFKA_STORAGE_ERROR in its LeaderAndIsr answer)
is offline to every election, even while it is the partition's recorded last ISR member and
its broker is live: not a preferred ElectLeaders, not a returning broker's offline election,
not an unclean one, not controlled shutdown."""

from __future__ import annotations

import asyncio
import uuid

from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.broker_requests import AlterPartitionItem
from tidelog.server.controller.context import ControllerResponse
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.zk import data as z
from tidelog.util.topic_partition import TopicPartition

PREFERRED, UNCLEAN = 0, 1


def test_a_replica_on_a_failed_dir_is_never_elected(zookeeper_connect: str) -> None:
    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        channel = RecordingChannel()
        c1 = KafkaController(1, zk1, lambda: channel, ControllerConfig(auto_leader_rebalance_enable=False))
        zk2, zk3 = register(zookeeper_connect, 2), register(zookeeper_connect, 3)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("d", 0)
        zk1.create_topic("d", uuid.uuid4(), {0: z.ReplicaAssignment((3, 2))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))

        def state() -> z.LeaderIsrAndControllerEpoch:
            return zk1.get_topic_partition_states([tp])[tp]

        s = state()
        assert s.leader == 3
        epoch3 = zk1.get_broker(3).epoch  # type: ignore[union-attr]
        _, out = await c1.alter_partition(3, epoch3, [AlterPartitionItem(tp, s.leader_epoch, (3,), s.zk_version)])
        assert out[tp].error_code == ErrorCode.NONE  # 2 fell behind: 3 alone in sync

        # broker 3's dir fails: its answer names the replica offline; nobody else is in sync
        c1.log_dir_events.on_response(3, ControllerResponse(0, {tp: int(ErrorCode.KAFKA_STORAGE_ERROR)}))
        await until(lambda: state().leader == -1, what="the partition offline")
        assert state().isr == (3,)  # the last ISR member stays recorded
        assert c1.context.offline_replicas(tp) == (3,)

        res = await c1.elect_leaders([tp], PREFERRED)
        assert res[tp][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 3: preferred, live, ISR
        # a broker's return runs the offline elections: 3 does not lead again
        before = len(channel.leader_and_isr(2))
        zk2.close()
        await until(lambda: 2 not in c1.context.live_brokers, what="2 gone")
        zk2 = register(zookeeper_connect, 2)
        await until(lambda: len(channel.leader_and_isr(2)) > before, what="LeaderAndIsr to 2")
        assert state().leader == -1 and c1.offline_partitions_count == 1
        # unclean: the only online replica is 2's
        res = await c1.elect_leaders([tp], UNCLEAN)
        assert res[tp] == (ErrorCode.NONE, None) and state().leader == 2
        # 2 (leading) puts 3 back in the ISR, then stops: controlled shutdown finds no online
        # replica to hand over to
        s, epoch2 = state(), zk1.get_broker(2).epoch  # type: ignore[union-attr]
        _, out = await c1.alter_partition(2, epoch2, [AlterPartitionItem(tp, s.leader_epoch, (2, 3), s.zk_version)])
        assert out[tp].error_code == ErrorCode.NONE
        err, left = await c1.controlled_shutdown(2, epoch2)
        assert err == ErrorCode.NONE and left == [tp] and state().leader == 2
        await c1.shutdown()
        for c in (zk1, zk2, zk3):
            c.close()

    asyncio.run(main())
