"""Unclean leader election in the controller against a real ZooKeeper (brokers are only
registrations): a partition whose only ISR member died stays offline while
``unclean.leader.election.enable`` is false, elects an out-of-sync replica once the topic's
override or the broker default turns it on (Kafka's TopicUncleanLeaderElectionEnable and
enableDefaultUncleanLeaderElection), or when ElectLeaders asks UNCLEAN; each such election
and only those count in ControllerStats UncleanLeaderElectionsPerSec."""

from __future__ import annotations

import asyncio
import time
import uuid

from controller_support import RecordingChannel, register, until

from tidelog.protocol.errors import ErrorCode
from tidelog.server.controller.broker_requests import ELECTION_UNCLEAN, AlterPartitionItem
from tidelog.server.controller.controller import ControllerConfig, KafkaController
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

CONFIG = ControllerConfig(auto_leader_rebalance_enable=False)


def _state(zk: KafkaZkClient, tp: TopicPartition) -> z.LeaderIsrAndControllerEpoch:
    return zk.get_topic_partition_states([tp])[tp]


async def _offline_with_isr_of_2(
    connect: str, topic: str, configs: dict[str, str]
) -> tuple[KafkaController, KafkaZkClient, TopicPartition]:
    """Controller 1; a partition on (2, 1) whose ISR shrank to (2); then 2 dies."""
    zk1 = register(connect, 1)
    channel = RecordingChannel()
    c1 = KafkaController(1, zk1, lambda: channel, CONFIG)
    zk2 = register(connect, 2)
    await c1.startup()
    await until(lambda: c1.is_active)
    tp = TopicPartition(topic, 0)
    zk1.create_topic(topic, uuid.uuid4(), {0: z.ReplicaAssignment((2, 1))}, configs)
    await until(lambda: tp in zk1.get_topic_partition_states([tp]))
    cur = _state(zk1, tp)
    _, out = await c1.alter_partition(2, zk1.get_broker(2).epoch,  # type: ignore[union-attr]
                                      [AlterPartitionItem(tp, cur.leader_epoch, (2,), cur.zk_version)])  # fmt: skip
    assert out[tp].error_code == ErrorCode.NONE
    zk2.close()
    await until(lambda: _state(zk1, tp).leader == -1, what="leader -1")
    await until(lambda: c1.offline_partitions_count == 1, what="offline")
    return c1, zk1, tp


def test_unclean_enabled_on_the_topic_elects_the_offline_partition(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, zk1, tp = await _offline_with_isr_of_2(
            zookeeper_connect, "later", {"unclean.leader.election.enable": "false"})
        epoch = _state(zk1, tp).leader_epoch
        c1.enable_topic_unclean_leader_election(tp.topic)  # still false in ZooKeeper: nothing
        await _drain(c1)
        assert _state(zk1, tp).leader == -1 and c1.unclean_leader_elections == 0
        zk1.set_or_create_entity_configs("topics", tp.topic, {"unclean.leader.election.enable": "true"})
        c1.enable_topic_unclean_leader_election(tp.topic)
        await until(lambda: c1.unclean_leader_elections == 1, what="an unclean election")
        s = _state(zk1, tp)
        assert (s.leader, s.isr, s.leader_recovery_state) == (1, (1,), z.LEADER_RECOVERING)
        assert s.leader_epoch == epoch + 1 and c1.offline_partitions_count == 0
        await _drain(c1)
        assert c1.unclean_leader_elections == 1  # once
        await c1.shutdown()
        zk1.close()

    asyncio.run(main())


def test_unclean_enabled_as_the_broker_default(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, zk1, tp = await _offline_with_isr_of_2(zookeeper_connect, "dflt", {})
        c1.set_default_unclean_leader_election(True)
        await until(lambda: c1.unclean_leader_elections == 1, what="an unclean election")
        assert _state(zk1, tp).leader == 1
        await c1.shutdown()
        zk1.close()

    asyncio.run(main())


def test_unclean_topic_override_false_wins_over_the_broker_default(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, zk1, tp = await _offline_with_isr_of_2(
            zookeeper_connect, "stays", {"unclean.leader.election.enable": "false"})
        c1.set_default_unclean_leader_election(True)
        await _drain(c1)
        assert _state(zk1, tp).leader == -1 and c1.unclean_leader_elections == 0
        await c1.shutdown()
        zk1.close()

    asyncio.run(main())


def test_unclean_elect_leaders_request(zookeeper_connect: str) -> None:
    async def main() -> None:
        c1, zk1, tp = await _offline_with_isr_of_2(zookeeper_connect, "asked", {})
        res = await c1.elect_leaders([tp], ELECTION_UNCLEAN)
        assert res[tp] == (ErrorCode.NONE, None)
        assert _state(zk1, tp).leader == 1 and c1.unclean_leader_elections == 1
        res = await c1.elect_leaders([tp], ELECTION_UNCLEAN)  # led by a live broker now
        assert res[tp][0] == ErrorCode.ELECTION_NOT_NEEDED
        assert c1.unclean_leader_elections == 1
        await c1.shutdown()
        zk1.close()

    asyncio.run(main())


def test_unclean_counter_leaves_clean_elections_out(zookeeper_connect: str) -> None:
    """The leader dies while another ISR member lives: a clean election, not counted."""

    async def main() -> None:
        zk1 = register(zookeeper_connect, 1)
        channel = RecordingChannel()
        c1 = KafkaController(1, zk1, lambda: channel, CONFIG)
        zk2 = register(zookeeper_connect, 2)
        zk3 = register(zookeeper_connect, 3)
        await c1.startup()
        await until(lambda: c1.is_active)
        tp = TopicPartition("clean", 0)
        zk1.create_topic("clean", uuid.uuid4(), {0: z.ReplicaAssignment((2, 3, 1))}, {})
        await until(lambda: tp in zk1.get_topic_partition_states([tp]))
        cur = _state(zk1, tp)
        _, out = await c1.alter_partition(2, zk1.get_broker(2).epoch,  # type: ignore[union-attr]
                                          [AlterPartitionItem(tp, cur.leader_epoch, (2, 3), cur.zk_version)])  # fmt: skip
        assert out[tp].error_code == ErrorCode.NONE
        zk2.close()
        await until(lambda: _state(zk1, tp).leader == 3, what="3 leads (clean)")
        await _drain(c1)
        assert c1.unclean_leader_elections == 0
        await c1.shutdown()
        zk1.close()
        zk3.close()

    asyncio.run(main())


async def _drain(c: KafkaController) -> None:
    """Until the controller has run the events queued so far (an empty ElectLeaders goes
    through its queue behind them)."""
    await asyncio.sleep(0)  # events queued thread-safe reach the queue
    assert await c.elect_leaders([], ELECTION_UNCLEAN) == {}


def test_unclean_broker_default_altered_reaches_the_controller(zookeeper_connect: str) -> None:
    """The cluster-default broker entity altered (as AlterConfigs does it) on a real broker in
    ZooKeeper: its controller takes the new default, and turning it off takes too."""
    broker = EmbeddedBroker({"broker.id": "1", "zookeeper.connect": zookeeper_connect,
                             "controlled.shutdown.retry.backoff.ms": "100"}).start()  # fmt: skip
    try:
        controller = broker.broker.cluster.controller
        assert controller.config.unclean_leader_election_enable is False
        for value in ("true", "false"):

            async def alter(value: str = value) -> None:
                broker.broker.dynamic_config.alter("", {"unclean.leader.election.enable": value}, False)

            broker.run(alter())
            deadline = time.monotonic() + 15
            while controller.config.unclean_leader_election_enable != (value == "true"):
                assert time.monotonic() < deadline, f"default {value} not applied"
                time.sleep(0.02)
    finally:
        broker.stop()
