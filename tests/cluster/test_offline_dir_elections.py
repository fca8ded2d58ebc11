"""Every election treats a replica on a failed log dir as offline (Kafka's
ControllerContext.isReplicaOnline, false for ``replicasOnOfflineDirs``): not only the log-dir
event's own election, but a broker's failure or return, ElectLeaders PREFERRED and UNCLEAN,
controlled shutdown. Three broker processes, each with two log dirs; broker Y's dir ``b``
fails while it is the last ISR member of one partition (``p``) and out of the ISR of another
(``u``, unclean election on). Y stays a live broker throughout, and never leads either."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import all_have_full_isr, states, wait_for

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

SESSION_TIMEOUT_MS = 20_000  # Y's dir fails while X is paused: X's session must outlive it
CONFIG = {
    "unclean.leader.election.enable": "false", "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": "1000", "replica.fetch.backoff.ms": "200",
    "log.flush.offset.checkpoint.interval.ms": "100", "log.initial.task.delay.ms": "0",
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
}  # fmt: skip
RECORDS = 20
PREFERRED, UNCLEAN = 0, 1


class TwoDirCluster(EmbeddedCluster):
    def broker_props(self, broker_id: int) -> dict[str, str]:
        props = super().broker_props(broker_id)
        props["log.dirs"] = f"{props['log.dirs']}/a,{props['log.dirs']}/b"
        return props


def _elect(cluster: EmbeddedCluster, tp: TopicPartition, election_type: int) -> int:
    """ElectLeaders (43 v2) sent to the controller: the partition's error code."""
    controller = cluster.wait_for_controller()

    async def ask() -> Any:
        conn = await AsyncBrokerConnection.connect(
            "127.0.0.1", cluster.brokers[controller].port, client_id="t", api_ranges={18: (0, 3), 43: (2, 2)}
        )
        try:
            return await conn.request(43, {"election_type": election_type, "timeout_ms": 10_000,
                                           "topic_partitions": [{"topic": tp.topic, "partitions": [tp.partition]}]})  # fmt: skip
        finally:
            await conn.close()

    result = asyncio.run(ask())
    return int(result.replica_election_results[0].partition_result[0].error_code)


def _produce(cluster: EmbeddedCluster, tp: TopicPartition, tag: str, acks: str = "all") -> list[bytes]:
    """Records every one of which is acknowledged; returns their values."""
    values = [f"{tp.topic}-{tp.partition}-{tag}-{i}".encode() for i in range(RECORDS)]
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks, "message.timeout.ms": 30_000})
    for v in values:
        p.produce(tp.topic, v, partition=tp.partition, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(60) == 0 and errors == []
    return values


def _high_watermark(c: Consumer, tp: TopicPartition) -> int:
    """The partition's high watermark from its leader. Right after an election a new
    consumer's metadata may not have the partition yet: librdkafka then answers locally with
    _UNKNOWN_PARTITION, asked again until it knows the partition."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return int(c.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition), timeout=10)[1])
        except KafkaException as e:
            if e.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _read_all(cluster: EmbeddedCluster, tp: TopicPartition) -> list[bytes]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"check-{uuid.uuid4()}",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([KafkaTopicPartition(tp.topic, tp.partition, 0)])
        high = _high_watermark(c, tp)
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            for m in c.consume(100, timeout=1):
                if m.error() is None:
                    out.append(m.value() or b"")
        return out
    finally:
        c.close()


def _never_led_by(cluster: EmbeddedCluster, tp: TopicPartition, broker: int, until_leader: int, what: str) -> None:
    """Poll the partition's state until ``until_leader`` shows; ``broker`` must never lead."""

    def check() -> bool:
        s = states(cluster, [tp])[tp]
        assert s.leader != broker, f"{tp} elected {broker}, a replica on a failed log dir"
        return s.leader == until_leader

    wait_for(check, 60, what)


def _on_y(cluster: EmbeddedCluster, y: int) -> set[str]:
    """The partition dirs in either of Y's log dirs."""
    assert cluster.directory is not None
    return {d.name for sub in "ab" if (cluster.directory / f"broker-{y}" / sub).is_dir()
            for d in (cluster.directory / f"broker-{y}" / sub).iterdir()}


def test_no_election_picks_a_replica_on_a_failed_log_dir(zookeeper_server: ZooKeeperServer) -> None:
    with TwoDirCluster(brokers=3, config=CONFIG, zookeeper=zookeeper_server) as cluster:
        assert cluster.directory is not None
        controller = cluster.wait_for_controller()
        x, y = [b for b in sorted(cluster.brokers) if b != controller]
        # u: X leads, unclean election allowed; p: Y (preferred) leads. Created one after the
        # other, each topic has one partition on each of Y's dirs (fewest partitions first)
        for name, replicas, config in (("u", (x, y), {"unclean.leader.election.enable": "true"}),
                                       ("p", (y, x), {})):  # fmt: skip
            cluster.zk.create_topic(name, uuid.uuid4(), {i: z.ReplicaAssignment(replicas) for i in range(2)},
                                    {"min.insync.replicas": "1", **config})  # fmt: skip
            tps = [TopicPartition(name, i) for i in range(2)]
            wait_for(lambda tps=tps: all_have_full_isr(cluster, tps, 2), 60, f"{name}'s full ISRs")
            # the ISR in ZooKeeper is the controller's initial one: Y's logs may not exist yet
            # (a log created after the next topic's would change where that one is placed)
            wait_for(lambda name=name: _on_y(cluster, y) >= {f"{name}-0", f"{name}-1"}, 60,
                     f"{name}'s logs on Y")
        dir_b = cluster.directory / f"broker-{y}" / "b"
        on_b = {d.name for d in dir_b.iterdir()}
        u = next(TopicPartition("u", i) for i in range(2) if f"u-{i}" in on_b)
        p = next(TopicPartition("p", i) for i in range(2) if f"p-{i}" in on_b)
        acked = {tp: _produce(cluster, tp, "before") for tp in (u, p)}

        # X paused past replica.lag.time.max.ms while p takes a write (a follower that has
        # everything is never out of sync): p's ISR shrinks to Y. Y's dir b fails, so p is left
        # with no online ISR member (leader -1, ISR [Y]) and Y leaves u's ISR
        paused = time.monotonic()
        cluster.brokers[x].signal(signal.SIGSTOP)
        try:
            # acks=1: on Y alone, unless X's fetch already in flight took them
            y_alone = _produce(cluster, p, "on-y-alone", acks="1")
            wait_for(lambda: states(cluster, [p])[p].isr == (y,), 30, "p's ISR shrunk to Y")
            # the disk goes: the dir moves away at once (files being written in it move with
            # it) and a file stands in its place, so the next checkpoint write into it fails
            dir_b.rename(dir_b.with_name("b-failed"))
            dir_b.write_bytes(b"")
            wait_for(lambda: states(cluster, [p])[p].leader == -1, 30, "p offline")
            wait_for(lambda: states(cluster, [u])[u].isr == (x,), 30, "Y out of u's ISR")
        finally:
            cluster.brokers[x].signal(signal.SIGCONT)
        assert time.monotonic() - paused < SESSION_TIMEOUT_MS / 1000  # X stayed registered
        assert states(cluster, [p])[p].isr == (y,)  # Y, live, is p's recorded ISR and preferred

        # a preferred election does not pick Y (in the ISR, live, but its replica is offline)
        assert _elect(cluster, p, PREFERRED) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert states(cluster, [p])[p].leader == -1

        # the leader of u stops: u's only other replica is Y's, so u goes offline even with
        # unclean election on; ElectLeaders UNCLEAN finds no eligible leader either
        cluster.stop_broker(x)
        _never_led_by(cluster, u, y, -1, "u offline")
        assert _elect(cluster, u, UNCLEAN) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        assert _elect(cluster, p, UNCLEAN) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE

        # X returns: it leads u again (its ISR); p, whose ISR is Y alone, stays offline
        cluster.start_broker(x)
        _never_led_by(cluster, u, y, x, "X leads u again")
        assert states(cluster, [p])[p].leader == -1  # decided in the same controller event
        # asked for, an unclean election gives p to X (the only online replica)
        assert _elect(cluster, p, UNCLEAN) == ErrorCode.NONE
        assert states(cluster, [p])[p].leader == x
        for tp in (u, p):
            acked[tp] += _produce(cluster, tp, "after")
            got = _read_all(cluster, tp)
            assert sorted(v for v in got if v not in y_alone) == sorted(acked[tp])  # each once
