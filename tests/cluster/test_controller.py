"""The controller against a real ZooKeeper, its brokers seen through a recording channel."""

from __future__ import annotations

import asyncio
import uuid

from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.broker_requests import AlterPartitionItem
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.util.topic_partition import TopicPartition

CONFIG = ControllerConfig(auto_leader_rebalance_enable=False)


def _controller(connect: str, broker_id: int) -> tuple[KafkaController, RecordingChannel, KafkaZkClient]:
    zk = register(connect, broker_id)
    channel = RecordingChannel()
    return KafkaController(broker_id, zk, lambda: channel, CONFIG), channel, zk


def _write_topic_like_a_tool(zk: KafkaZkClient, topic: str, assignment: dict[int, list[int]]) -> None:
    parts = ",".join(f'"{p}":{r}'.replace(" ", "") for p, r in assignment.items())
    zk.zk.create(z.topic_path(topic), f'{{"version":1,"partitions":{{{parts}}}}}'.encode())


def _state(zk: KafkaZkClient, tp: TopicPartition) -> z.LeaderIsrAndControllerEpoch:
    return zk.get_topic_partition_states([tp])[tp]


def test_topic_written_behind_the_controllers_back_gets_leaders(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        others = [register(zookeeper_connect, b) for b in (2, 3)]
        await c1.startup()
        await until(lambda: c1.is_active, what="broker 1 controller")
        assert zk1.get_controller_epoch() == (1, 1)
        # one watcher per event: re-arming a set watch adds no second one
        assert c1.watch(c1._broker_change) is c1.watch(c1._broker_change)
        assert c1._modification_watch("x") is c1._modification_watch("x")
        _write_topic_like_a_tool(zk1, "cmak", {0: [2, 3, 1], 1: [3, 1, 2]})
        tp0, tp1 = TopicPartition("cmak", 0), TopicPartition("cmak", 1)
        await until(lambda: zk1.get_topic_partition_states([tp0, tp1]).keys() == {tp0, tp1})
        assert _state(zk1, tp0) == z.LeaderIsrAndControllerEpoch(2, 0, (2, 3, 1), 1, 0, 0)
        # the controller gave the tool's topic an id (v3 JSON)
        got = zk1.get_topic_assignment("cmak")
        assert got is not None and got[0].topic_id is not None
        await until(lambda: ch1.last_state_sent(3, tp1) is not None)
        sent = [p for _, r in ch1.leader_and_isr(3) for p in r.partitions if p.tp == tp1]
        assert sent[0].is_new and sent[0].replicas == (3, 1, 2) and sent[0].topic_id == got[0].topic_id
        await c1.shutdown()
        for o in others:
            o.close()
        zk1.close()

    asyncio.run(main())


def test_broker_loss_elects_from_isr_and_return_restores(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        zk2, zk3 = register(zookeeper_connect, 2), register(zookeeper_connect, 3)
        await c1.startup()
        await until(lambda: c1.is_active)
        zk1.create_topic("t", uuid.uuid4(), {p: z.ReplicaAssignment(r) for p, r in
                         {0: (2, 3, 1), 1: (3, 1, 2), 2: (1, 2, 3)}.items()}, {})  # fmt: skip
        tps = [TopicPartition("t", p) for p in range(3)]
        await until(lambda: len(zk1.get_topic_partition_states(tps)) == 3)
        zk2.close()  # broker 2 dies: its ephemeral goes
        await until(lambda: _state(zk1, tps[0]).leader == 3, what="partition 0 moves to 3")
        s0 = _state(zk1, tps[0])
        assert s0.isr == (3, 1) and s0.leader_epoch == 1 and s0.zk_version >= 1
        await until(lambda: _state(zk1, tps[1]).isr == (3, 1), what="2 leaves every ISR")
        assert _state(zk1, tps[1]).leader == 3  # a follower's loss keeps the leader
        await until(lambda: ch1.last_state_sent(3, tps[0]) == _state(zk1, tps[0]))
        assert 2 not in ch1.brokers
        before = len(ch1.leader_and_isr(2))
        zk2 = register(zookeeper_connect, 2)  # it comes back
        await until(lambda: len(ch1.leader_and_isr(2)) > before, what="LeaderAndIsr to 2")
        assert ch1.last_state_sent(2, tps[0]).leader == 3
        assert c1.offline_partitions_count == 0
        await c1.shutdown()
        for c in (zk1, zk2, zk3):
            c.close()

    asyncio.run(main())


def test_no_isr_member_alive_leaves_partition_offline(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("solo", 0)
        zk1.create_topic("solo", uuid.uuid4(), {0: z.ReplicaAssignment((2, 1))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        # an ISR of [2] only, as if 1 had fallen behind
        cur = _state(zk1, tp)
        await c1.alter_partition(2, zk1.get_broker(2).epoch,  # type: ignore[union-attr]
                                 [AlterPartitionItem(tp, cur.leader_epoch, (2,), cur.zk_version)])  # fmt: skip
        assert _state(zk1, tp).isr == (2,)
        zk2.close()
        await until(lambda: _state(zk1, tp).leader == -1, what="leader -1")
        assert _state(zk1, tp).isr == (2,)  # the last ISR member stays recorded
        await until(lambda: c1.offline_partitions_count == 1, what="counted offline")
        zk2 = register(zookeeper_connect, 2)
        await until(lambda: _state(zk1, tp).leader == 2, what="2 leads again")
        await c1.shutdown()
        zk1.close()
        zk2.close()

    asyncio.run(main())


def test_failover_within_session_timeout_and_fencing(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        c2, _, zk2 = _controller(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        await c2.startup()
        await until(lambda: c2.active_controller_id == 1)
        assert not c2.is_active
        zk1.create_topic("f", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))}, {})
        tp = TopicPartition("f", 0)
        await until(lambda: tp in zk2.get_topic_partition_states([tp]))
        old_version = c1.context.epoch_zk_version
        zk1.zk.stop()  # broker 1's ZooKeeper connection is gone (its session expires)
        # a generous deadline, not a measure: what counts is the election that follows
        await until(lambda: c2.is_active, timeout=30, what="broker 2 takes over")
        assert zk2.get_controller_epoch() == (2, 2)
        await until(lambda: _state(zk2, tp).leader == 2, what="2 leads f-0")
        assert _state(zk2, tp).controller_epoch == 2
        # the deposed controller's writes are refused: its epoch zkVersion is stale
        zombie = KafkaZkClient(zookeeper_connect)
        zombie.start()
        res = None
        try:
            zombie.update_leader_and_isr({tp: _state(zk2, tp).new_leader_and_isr(1, [1])}, old_version)
        except Exception as e:
            res = e
        assert type(res).__name__ == "ControllerMovedError"
        assert _state(zk2, tp).leader == 2
        zombie.close()
        await c1.shutdown()
        await c2.shutdown()
        zk2.close()
        zk1.close()

    asyncio.run(main())


def test_controlled_shutdown_moves_leadership_first(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        zk2, zk3 = register(zookeeper_connect, 2), register(zookeeper_connect, 3)
        await c1.startup()
        await until(lambda: c1.is_active)
        zk1.create_topic("cs", uuid.uuid4(), {0: z.ReplicaAssignment((3, 1, 2)),
                                              1: z.ReplicaAssignment((1, 2, 3))}, {})  # fmt: skip
        tps = [TopicPartition("cs", 0), TopicPartition("cs", 1)]
        await until(lambda: len(zk1.get_topic_partition_states(tps)) == 2)
        err, remaining = await c1.controlled_shutdown(3, zk1.get_broker(3).epoch)  # type: ignore[union-attr]
        assert (err, remaining) == (0, [])
        assert _state(zk1, tps[0]).leader == 1 and _state(zk1, tps[0]).isr == (1, 2)
        assert _state(zk1, tps[1]).isr == (1, 2)  # a follower leaves the ISR
        stops = [r for b, r in ch1.stop_replica() if b == 3]
        assert stops and stops[-1].partitions[tps[1]][1] is False  # StopReplica(delete=false)
        err, _ = await c1.controlled_shutdown(3, 1)  # an older broker epoch
        assert err == ErrorCode.STALE_BROKER_EPOCH
        err, _ = await c1.controlled_shutdown(9, -1)
        assert err == ErrorCode.BROKER_NOT_AVAILABLE
        await c1.shutdown()
        for c in (zk1, zk2, zk3):
            c.close()

    asyncio.run(main())


def test_alter_partition_and_elect_leaders(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("ap", 0)
        zk1.create_topic("ap", uuid.uuid4(), {0: z.ReplicaAssignment((2, 1))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        e2 = zk1.get_broker(2).epoch  # type: ignore[union-attr]
        cur = _state(zk1, tp)
        err, _ = await c1.alter_partition(2, e2 - 1, [AlterPartitionItem(tp, 0, (2,), 0)])
        assert err == ErrorCode.STALE_BROKER_EPOCH
        err, out = await c1.alter_partition(2, e2, [AlterPartitionItem(tp, 0, (2, 9), 0)])
        assert out[tp].error_code == ErrorCode.INELIGIBLE_REPLICA
        err, out = await c1.alter_partition(2, e2, [AlterPartitionItem(tp, 0, (2,), cur.zk_version)])
        assert out[tp].error_code == 0 and out[tp].state is not None
        assert out[tp].state.zk_version == cur.zk_version + 1 == _state(zk1, tp).zk_version
        err, out = await c1.alter_partition(2, e2, [AlterPartitionItem(tp, 0, (2, 1), cur.zk_version)])
        assert out[tp].error_code == ErrorCode.INVALID_UPDATE_VERSION
        new_version = _state(zk1, tp).zk_version
        err, out = await c1.alter_partition(2, e2, [AlterPartitionItem(tp, 0, (2, 1), new_version)])
        assert out[tp].error_code == 0 and _state(zk1, tp).isr == (2, 1)
        # the UpdateMetadata that follows carries the committed ISR to every broker
        assert any(p.state.isr == (2, 1) for b, r in ch1.update_metadata() if b == 1 for p in r.partitions)
        # preferred election: 2 leads already
        res = await c1.elect_leaders([tp], 0)
        assert res[tp][0] == ErrorCode.ELECTION_NOT_NEEDED
        # move leadership to 1 by a controlled shutdown of 2, then elect the preferred back
        await c1.controlled_shutdown(2, e2)
        assert _state(zk1, tp).leader == 1
        c1.context.shutting_down_broker_ids.discard(2)  # 2 stays (it changed its mind)
        res = await c1.elect_leaders([tp], 0)
        assert res[tp][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 2 left the ISR
        _, out = await c1.alter_partition(1, zk1.get_broker(1).epoch,  # type: ignore[union-attr]
                                            [AlterPartitionItem(tp, _state(zk1, tp).leader_epoch, (1, 2), _state(zk1, tp).zk_version)])  # fmt: skip
        assert out[tp].error_code == 0
        res = await c1.elect_leaders([tp], 0)
        assert res[tp] == (0, None) and _state(zk1, tp).leader == 2
        assert (await c1.elect_leaders([TopicPartition("nope", 0)], 0))[TopicPartition("nope", 0)][0] == 3
        await c1.shutdown()
        zk1.close()
        zk2.close()

    asyncio.run(main())


def test_topic_deletion_completes_on_a_broker_that_was_down(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("gone", 0)
        zk1.create_topic("gone", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))},
                         {"retention.ms": "1"})  # fmt: skip
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        zk2.close()
        await until(lambda: 2 not in c1.context.live_brokers)
        zk1.create_delete_topic_path("gone")  # as DeleteTopics or a tool does
        await until(lambda: any(b == 1 and tp in r.partitions for b, r in ch1.stop_replica()))
        assert zk1.get_all_topics() == ["gone"]  # broker 2's replica is still there
        zk2 = register(zookeeper_connect, 2)
        await until(lambda: zk1.get_all_topics() == [], what="deletion completes")
        assert any(b == 2 and r.partitions[tp] == (-2, True) for b, r in ch1.stop_replica())
        await until(lambda: zk1.get_topic_deletions() == [], what="the request znode goes last")
        assert zk1.zk.exists("/config/topics/gone") is None
        await until(lambda: "gone" not in c1.context.topic_ids, what="forgotten by the controller")
        await c1.shutdown()
        zk1.close()
        zk2.close()

    asyncio.run(main())


def test_unclean_election_as_a_topic_override(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("dirty", 0)
        zk1.create_topic("dirty", uuid.uuid4(), {0: z.ReplicaAssignment((2, 1))},
                         {"unclean.leader.election.enable": "true"})  # fmt: skip
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        cur = _state(zk1, tp)
        await c1.alter_partition(2, zk1.get_broker(2).epoch,  # type: ignore[union-attr]
                                 [AlterPartitionItem(tp, cur.leader_epoch, (2,), cur.zk_version)])  # fmt: skip
        zk2.close()  # the only ISR member dies: 1 is elected although out of sync
        await until(lambda: _state(zk1, tp).leader == 1, what="unclean leader 1")
        s = _state(zk1, tp)
        assert s.isr == (1,) and s.leader_recovery_state == z.LEADER_RECOVERING
        await c1.shutdown()
        zk1.close()

    asyncio.run(main())


def test_reassignment_written_by_a_tool(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        others = [register(zookeeper_connect, b) for b in (2, 3)]
        await c1.startup()
        await until(lambda: c1.is_active)
        shrink, grow = TopicPartition("r", 0), TopicPartition("r", 1)
        zk1.create_topic("r", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2, 3)),
                                             1: z.ReplicaAssignment((1, 2))}, {})  # fmt: skip
        await until(lambda: len(zk1.get_topic_partition_states([shrink, grow])) == 2)
        # as kafka-reassign-partitions --zookeeper writes it
        zk1.zk.create(z.REASSIGN_PARTITIONS_PATH, z.encode_reassignment({shrink: (2, 3), grow: (1, 2, 3)}))

        def assignment() -> dict[int, z.ReplicaAssignment]:
            got = zk1.get_topic_assignment("r")
            assert got is not None
            return dict(got[0].partitions)

        await until(lambda: assignment()[0] == z.ReplicaAssignment((2, 3)), what="shrink completes")
        s = _state(zk1, shrink)
        assert s.leader == 2 and 1 not in s.isr
        await until(lambda: any(b == 1 and r.partitions.get(shrink) == (-2, True) for b, r in ch1.stop_replica()),
                    what="the replica left behind is deleted")  # fmt: skip
        # growing waits for the new replica to join the ISR
        await until(lambda: assignment()[1] == z.ReplicaAssignment((1, 2, 3), (3,), ()))
        await until(lambda: ch1.last_state_sent(3, grow) is not None, what="the new replica is told to fetch")
        await until(lambda: z.decode_reassignment(zk1.zk.get(z.REASSIGN_PARTITIONS_PATH)[0]) == {grow: (1, 2, 3)},
                    what="the finished shrink leaves the request znode")  # fmt: skip
        cur = _state(zk1, grow)
        _, out = await c1.alter_partition(1, zk1.get_broker(1).epoch,  # type: ignore[union-attr]
                                            [AlterPartitionItem(grow, cur.leader_epoch, (1, 2, 3), cur.zk_version)])  # fmt: skip
        assert out[grow].error_code == 0
        await until(lambda: assignment()[1] == z.ReplicaAssignment((1, 2, 3)), what="grow completes")
        assert zk1.zk.exists(z.REASSIGN_PARTITIONS_PATH) is None
        await c1.shutdown()
        for c in (zk1, *others):
            c.close()

    asyncio.run(main())


def test_isr_change_notification_and_auto_rebalance(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, ch1, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tps = [TopicPartition("ib", p) for p in range(4)]
        zk1.create_topic("ib", uuid.uuid4(), {p: z.ReplicaAssignment((2, 1) if p % 2 else (1, 2))
                                              for p in range(4)}, {})  # fmt: skip
        await until(lambda: len(zk1.get_topic_partition_states(tps)) == 4)
        # an old-style leader writes the state itself and leaves a notice
        cur = _state(zk1, tps[0])
        zk1.zk.set(z.partition_state_path(tps[0]),
                   z.encode_partition_state(z.LeaderIsrAndControllerEpoch(1, cur.leader_epoch, (1,), 1)),
                   version=cur.zk_version)  # fmt: skip
        zk1.zk.create(f"{z.ISR_CHANGE_NOTIFICATION_PATH}/{z.ISR_CHANGE_PREFIX}", z.encode_isr_change([tps[0]]),
                      sequence=True)  # fmt: skip
        await until(lambda: zk1.get_children(z.ISR_CHANGE_NOTIFICATION_PATH) == [], what="notice handled")
        assert c1.context.leadership[tps[0]].isr == (1,)
        assert any(p.tp == tps[0] and p.state.isr == (1,) for _, r in ch1.update_metadata() for p in r.partitions)
        # broker 2 leaves and returns: partitions it prefers are led by 1 (imbalance 100%)
        e2 = zk2.get_broker(2).epoch  # type: ignore[union-attr]
        await c1.controlled_shutdown(2, e2)
        zk2.close()
        await until(lambda: 2 not in c1.context.live_brokers)
        zk2 = register(zookeeper_connect, 2)
        await until(lambda: 2 in c1.context.live_brokers)
        for tp in (tps[1], tps[3]):  # the leader (1) reports 2 caught up
            s = _state(zk1, tp)
            await c1.alter_partition(1, zk1.get_broker(1).epoch,  # type: ignore[union-attr]
                                     [AlterPartitionItem(tp, s.leader_epoch, (1, 2), s.zk_version)])  # fmt: skip
        assert {_state(zk1, tp).leader for tp in (tps[1], tps[3])} == {1}
        c1.put(c1.check_leader_imbalance)
        await until(lambda: all(_state(zk1, tp).leader == 2 for tp in (tps[1], tps[3])), what="rebalanced")
        assert _state(zk1, tps[0]).leader == 1 and _state(zk1, tps[2]).leader == 1
        await c1.shutdown()
        zk1.close()
        zk2.close()

    asyncio.run(main())


def test_a_new_controller_resumes_a_pending_deletion(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        await c1.startup()
        await until(lambda: c1.is_active)
        c3, ch3, zk3 = _controller(zookeeper_connect, 3)
        await c3.startup()
        zk2 = register(zookeeper_connect, 2)
        tp = TopicPartition("later", 0)
        zk1.create_topic("later", uuid.uuid4(), {0: z.ReplicaAssignment((2, 3))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        zk2.close()  # broker 2 is down while the deletion is asked
        await until(lambda: 2 not in c1.context.live_brokers)
        zk1.create_delete_topic_path("later")
        await until(lambda: "later" in c1.context.topics_to_be_deleted)
        await c1.shutdown()
        zk1.close()  # the controller goes; broker 3 takes over
        await until(lambda: c3.is_active, what="3 takes over")
        await until(lambda: "later" in c3.context.topics_to_be_deleted, what="3 resumes the deletion")
        assert zk3.get_all_topics() == ["later"]
        zk2 = register(zookeeper_connect, 2)
        await until(lambda: zk3.get_all_topics() == [], what="deleted once 2 is back")
        assert any(b == 2 and tp in r.partitions for b, r in ch3.stop_replica())
        await c3.shutdown()
        zk2.close()
        zk3.close()

    asyncio.run(main())


def test_alter_partition_answers_not_controller_when_deposed_mid_write(zookeeper_connect: str) -> None:
    """A controller whose epoch znode moved on under it (another controller won) answers the
    AlterPartition it was writing NOT_CONTROLLER, as Kafka's ControllerMovedException does,
    and resigns; it writes nothing."""
    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        zk2 = register(zookeeper_connect, 2)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("deposed", 0)
        zk1.create_topic("deposed", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        before = _state(zk1, tp)
        epoch, version = zk2.get_controller_epoch()  # type: ignore[misc]
        zk2.zk.set(z.CONTROLLER_EPOCH_PATH, str(epoch + 1).encode(), version=version)
        err, out = await c1.alter_partition(1, zk1.get_broker(1).epoch,  # type: ignore[union-attr]
                                            [AlterPartitionItem(tp, 0, (1,), before.zk_version)])  # fmt: skip
        assert (err, out) == (ErrorCode.NOT_CONTROLLER, {})
        assert _state(zk1, tp) == before
        await until(lambda: not c1.is_active, what="the deposed controller resigns")
        await c1.shutdown()
        zk1.close()
        zk2.close()

    asyncio.run(main())


def test_failover_takes_replicas_of_dead_brokers_offline(zookeeper_connect: str) -> None:
    """Kafka's ReplicaStateMachine.startup: the new controller finds brokers that are not
    alive and takes their replicas out of every ISR; a partition a dead broker led gets a
    leader from its ISR filtered by live brokers, in one write."""

    async def main() -> None:
        c1, _, zk1 = _controller(zookeeper_connect, 1)
        c2, ch2, zk2 = _controller(zookeeper_connect, 2)
        c3, _, zk3 = _controller(zookeeper_connect, 3)
        await c1.startup()
        await until(lambda: c1.is_active)
        await c2.startup()  # broker 3 stands for controller only once 2 is it
        zk1.create_topic("o", uuid.uuid4(), {p: z.ReplicaAssignment(r) for p, r in
                         {0: (2, 3, 1), 1: (1, 2, 3), 2: (1,)}.items()}, {})  # fmt: skip
        tps = [TopicPartition("o", p) for p in range(3)]
        await until(lambda: len(zk1.get_topic_partition_states(tps)) == 3)
        before = zk2.get_topic_partition_states(tps)
        await c1.shutdown()
        zk1.close()  # broker 1, the controller, is gone: its ephemerals with it
        await until(lambda: c2.is_active, what="broker 2 takes over")
        await until(lambda: zk2.get_topic_partition_states(tps)[tps[0]].isr == (2, 3))
        after = zk2.get_topic_partition_states(tps)
        # a follower's loss: same leader, new ISR at the next leader epoch
        assert (after[tps[0]].leader, after[tps[0]].leader_epoch) == (2, before[tps[0]].leader_epoch + 1)
        # the leader's loss: the first live ISR member leads, written once
        assert after[tps[1]] == z.LeaderIsrAndControllerEpoch(2, 1, (2, 3), 2, 0, before[tps[1]].zk_version + 1)
        # no live replica: no leader, the last ISR member stays recorded
        assert (after[tps[2]].leader, after[tps[2]].isr) == (z.NO_LEADER, (1,))
        await until(lambda: ch2.last_state_sent(3, tps[0]) == after[tps[0]])
        await c3.startup()
        await until(lambda: c3.active_controller_id == 2)
        await c2.shutdown()
        zk2.close()  # broker 2 goes too
        await until(lambda: c3.is_active, what="broker 3 takes over")
        await until(lambda: zk3.get_topic_partition_states(tps)[tps[1]].leader == 3)
        last = zk3.get_topic_partition_states(tps)
        assert last[tps[0]].isr == (3,) and last[tps[0]].leader == 3
        assert last[tps[2]] == after[tps[2]]  # already offline: not written again
        await c3.shutdown()
        zk3.close()

    asyncio.run(main())
