"""Brokers in one ZooKeeper cluster (in-process): registration with their bound listeners,
one controller, controlled shutdown and controller failover on a clean stop."""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_zookeeper
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition


def _wait(cond, timeout: float = 15.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def cluster(zookeeper_connect: str) -> Iterator[tuple[list[EmbeddedBroker], KafkaZkClient]]:
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    brokers: list[EmbeddedBroker] = []
    for b in (1, 2, 3):
        brokers.append(EmbeddedBroker({
            "broker.id": str(b), "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000", "controlled.shutdown.retry.backoff.ms": "100",
            "auto.leader.rebalance.enable": "false",
        }).start())  # fmt: skip
    yield brokers, zk
    for broker in brokers:
        if broker.broker is not None and broker._thread is not None:
            broker.stop()
    zk.close()


def _controller(zk: KafkaZkClient) -> int | None:
    return zk.get_controller_id()


def test_brokers_register_their_listeners_and_elect_one_controller(cluster) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = cluster
    regs = zk.get_all_brokers()
    assert sorted(regs) == [1, 2, 3]
    for b in brokers:
        reg = regs[b.broker.node_id]
        assert reg.endpoints == (z.EndPoint("PLAINTEXT", "127.0.0.1", b.port, "PLAINTEXT"),)
        assert reg.epoch == b.broker.cluster.broker_epoch
    _wait(lambda: _controller(zk) is not None)
    active = [b for b in brokers if b.broker.cluster.controller.is_active]
    assert [b.broker.node_id for b in active] == [_controller(zk)]


def test_controlled_shutdown_moves_leadership_before_the_broker_leaves(cluster) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = cluster
    _wait(lambda: _controller(zk) is not None)
    zk.create_topic("cs", uuid.uuid4(), {p: z.ReplicaAssignment(r) for p, r in
                    {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}.items()}, {})  # fmt: skip
    tps = [TopicPartition("cs", p) for p in range(3)]
    _wait(lambda: len(zk.get_topic_partition_states(tps)) == 3, what="partition states")
    controller = _controller(zk)
    victim = next(b for b in brokers if b.broker.node_id != controller)
    vid = victim.broker.node_id
    assert victim.run(victim.broker.cluster.controlled_shutdown()) is True
    states = zk.get_topic_partition_states(tps)
    assert all(s.leader != vid and vid not in s.isr for s in states.values()), states
    assert zk.get_broker(vid) is not None  # moved while the broker is still registered


def test_controller_moves_when_its_broker_stops(cluster) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = cluster
    _wait(lambda: _controller(zk) is not None)
    first = _controller(zk)
    epoch = zk.get_controller_epoch()
    assert epoch is not None
    old = next(b for b in brokers if b.broker.node_id == first)
    old.stop()
    _wait(lambda: _controller(zk) not in (None, first), timeout=30, what="a new controller")
    assert zk.get_controller_epoch()[0] == epoch[0] + 1  # type: ignore[index]
    assert sorted(zk.get_all_brokers()) == sorted({1, 2, 3} - {first})


def test_a_broker_stops_when_zookeeper_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    require_zookeeper()
    caplog.set_level(logging.WARNING, logger="tidelog")
    with ZooKeeperServer() as zk_server:
        broker = EmbeddedBroker({
            "zookeeper.connect": zk_server.connect_string("/gone"),
            "zookeeper.session.timeout.ms": "6000",
        }).start()  # fmt: skip
        assert broker.broker.cluster.controller.is_active or _wait_active(broker)
        zk_server.stop()
        broker.stop()  # a hang would meet pytest-timeout
        # the broker decided it could not ask a controller and skipped the controlled shutdown
        assert "no ZooKeeper connection, no controlled shutdown" in caplog.text


def _wait_active(broker: EmbeddedBroker) -> bool:
    _wait(lambda: broker.broker.cluster.controller.is_active, what="controller")
    return True


async def _call(port: int, api_key: int, version: int, body: dict) -> object:  # type: ignore[type-arg]
    conn = await AsyncBrokerConnection.connect(
        "127.0.0.1", port, client_id="test", api_ranges={18: (0, 3), api_key: (version, version)}
    )
    try:
        return await conn.request(api_key, body)
    finally:
        await conn.close()


def _elect_codes(port: int, body: dict) -> dict[str, int]:  # type: ignore[type-arg]
    r = asyncio.run(_call(port, 43, 2, body))
    return {t.topic: t.partition_result[0].error_code for t in r.replica_election_results}  # type: ignore[attr-defined]


def test_alter_partition_and_elect_leaders_on_the_wire(cluster) -> None:  # type: ignore[no-untyped-def]
    brokers, zk = cluster
    _wait(lambda: _controller(zk) is not None)
    cid = _controller(zk)
    by_id = {b.broker.node_id: b for b in brokers}
    v, a = [b for b in (1, 2, 3) if b != cid][:2]
    tid = uuid.uuid4()
    tp = TopicPartition("el", 0)
    zk.create_topic("el", tid, {0: z.ReplicaAssignment((v, a, cid))}, {})
    _wait(lambda: tp in zk.get_topic_partition_states([tp]), what="state")
    port = by_id[cid].port
    elect = {"election_type": 0, "timeout_ms": 5000,
             "topic_partitions": [{"topic": "el", "partitions": [0]}, {"topic": "nope", "partitions": [0]}]}  # fmt: skip
    codes = _elect_codes(port, elect)
    assert codes == {"el": ErrorCode.ELECTION_NOT_NEEDED, "nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    r = asyncio.run(_call(by_id[a].port, 43, 2, elect))  # not the controller
    assert {t.partition_result[0].error_code for t in r.replica_election_results} == {ErrorCode.NOT_CONTROLLER}  # type: ignore[attr-defined]
    # v stops (leadership moves to a, v leaves the ISR) and comes back
    by_id[v].restart()
    _wait(lambda: zk.get_broker(v) is not None, what="v registered again")
    s = zk.get_topic_partition_states([tp])[tp]
    assert s.leader == a
    # v catches up by fetching and the leader (a) puts it back in the ISR with AlterPartition
    _wait(lambda: v in zk.get_topic_partition_states([tp])[tp].isr, what="v back in the ISR")
    s = zk.get_topic_partition_states([tp])[tp]
    assert s.zk_version > 0  # every ISR change moved the partition epoch on
    a_epoch = zk.get_broker(a).epoch  # type: ignore[union-attr]
    isr = [{"broker_id": b, "broker_epoch": -1} for b in s.isr if b != cid]
    alter = {"broker_id": a, "broker_epoch": a_epoch, "topics": [{"topic_id": tid, "partitions": [
        {"partition_index": 0, "leader_epoch": s.leader_epoch, "new_isr_with_epochs": isr,
         "leader_recovery_state": 0, "partition_epoch": s.zk_version - 1}]}]}  # fmt: skip
    stale = asyncio.run(_call(port, 56, 3, {**alter, "broker_epoch": a_epoch - 1}))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
    r = asyncio.run(_call(port, 56, 3, alter))  # an older partition epoch
    assert r.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION  # type: ignore[attr-defined]
    assert _elect_codes(port, elect)["el"] == ErrorCode.NONE
    assert zk.get_topic_partition_states([tp])[tp].leader == v


def _expire_session(connect: str, client: KafkaZkClient) -> None:
    """Expire ``client``'s session as ZooKeeper would: another client takes it over with the
    same id and password and closes it."""
    session_id, password = client.zk.client_id
    hosts = connect.split("/", 1)[0]
    thief = KazooClient(hosts=hosts, client_id=(session_id, password))
    thief.start()
    thief.stop()
    thief.close()


def test_session_expiry_resigns_then_registers_again(zookeeper_connect: str) -> None:
    broker = EmbeddedBroker({"broker.id": "7", "zookeeper.connect": zookeeper_connect,
                             "zookeeper.session.timeout.ms": "6000"}).start()  # fmt: skip
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    try:
        node = broker.broker.cluster
        _wait(lambda: node.controller.is_active, what="controller")
        epoch, controller_epoch = node.broker_epoch, zk.get_controller_epoch()
        _expire_session(zookeeper_connect, node.zk)
        # a new session: registered again with a new broker epoch, controller again
        _wait(lambda: node.broker_epoch > epoch, what="registered again")
        reg = zk.get_broker(7)
        assert reg is not None and reg.epoch == node.broker_epoch
        _wait(lambda: node.controller.is_active and zk.get_controller_id() == 7, what="re-elected")
        assert zk.get_controller_epoch()[0] == controller_epoch[0] + 1  # type: ignore[index]
        # the watches went with the old session: the new one set them again, so a topic
        # created elsewhere still reaches this broker's metadata store
        zk.create_topic("after", uuid.uuid4(), {0: z.ReplicaAssignment((7,))}, {})
        _wait(lambda: "after" in broker.broker.replica_manager.store.topics, what="topic mirrored")
    finally:
        zk.close()
        broker.stop()


def test_controller_metrics_count_on_the_active_controller_only(zookeeper_connect: str) -> None:
    brokers = [EmbeddedBroker({"broker.id": str(b), "zookeeper.connect": zookeeper_connect,
                               "http.listeners": "http://127.0.0.1:0",
                               "controlled.shutdown.retry.backoff.ms": "100"}).start() for b in (1, 2)]  # fmt: skip
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    try:
        _wait(lambda: zk.get_controller_id() is not None, what="controller")
        zk.create_topic("m", uuid.uuid4(), {p: z.ReplicaAssignment((1, 2)) for p in range(3)}, {})
        tps = [TopicPartition("m", p) for p in range(3)]
        _wait(lambda: len(zk.get_topic_partition_states(tps)) == 3, what="states")

        def scrape(b: EmbeddedBroker) -> dict[str, float]:
            text = urllib.request.urlopen(b.http_url + "/metrics", timeout=10).read().decode()
            return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
                    if line.startswith("kafka_controller_kafkacontroller_")}  # fmt: skip

        by_id = {b.broker.node_id: b for b in brokers}
        active = by_id[zk.get_controller_id()]  # type: ignore[index]
        other = next(b for b in brokers if b is not active)
        m = scrape(active)
        assert m["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        assert m["kafka_controller_kafkacontroller_globalpartitioncount"] == 3
        assert m["kafka_controller_kafkacontroller_globaltopiccount"] == 1
        assert m["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
        assert scrape(other)["kafka_controller_kafkacontroller_activecontrollercount"] == 0
    finally:
        zk.close()
        for b in brokers:
            b.stop()


def test_brokers_talk_over_a_sasl_inter_broker_listener(zookeeper_connect: str) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            'password="broker-secret" user_broker="broker-secret";')  # fmt: skip
    props = {
        "zookeeper.connect": zookeeper_connect, "controlled.shutdown.retry.backoff.ms": "100",
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas,
    }  # fmt: skip
    brokers = [EmbeddedBroker({**props, "broker.id": str(b)}).start() for b in (1, 2)]
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    try:
        sec = brokers[0].broker.cluster.security
        assert (sec.security_protocol, sec.sasl_mechanism, sec.sasl_username) == (
            "SASL_PLAINTEXT", "PLAIN", "broker")
        reg = zk.get_broker(2)
        assert reg is not None and {e.listener_name for e in reg.endpoints} == {"PLAINTEXT", "INTERNAL"}
        _wait(lambda: zk.get_controller_id() is not None, what="controller")
        zk.create_topic("s", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2)), 1: z.ReplicaAssignment((2, 1))}, {})
        tps = [TopicPartition("s", 0), TopicPartition("s", 1)]
        _wait(lambda: len(zk.get_topic_partition_states(tps)) == 2, what="states")
        victim = next(b for b in brokers if b.broker.node_id != zk.get_controller_id())
        # ControlledShutdown goes to the controller's INTERNAL listener, authenticated
        assert victim.run(victim.broker.cluster.controlled_shutdown()) is True
        vid = victim.broker.node_id
        assert all(s.leader != vid for s in zk.get_topic_partition_states(tps).values())
    finally:
        zk.close()
        for b in brokers:
            b.stop()
