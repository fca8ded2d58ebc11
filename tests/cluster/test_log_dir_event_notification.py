"""A failed log dir in a cluster (Kafka's log dir event notification): the broker announces
it under /log_dir_event_notification, the controller learns which replicas are offline from
the broker's LeaderAndIsr answers, moves their leadership, shrinks their ISRs and every
broker reports them as offline replicas."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

TOPIC = "events"
# broker 3 leads partitions 0, 1 and 4 and follows the others
ASSIGNMENT = [[3, 1, 2], [3, 2, 1], [1, 3, 2], [2, 3, 1], [3, 1, 2], [1, 2, 3]]


def _wait(cond: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_log_dir_event_znodes_are_kafkas(zookeeper_connect: str) -> None:
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    try:
        path = zk.propagate_log_dir_event(3)
        assert path.endswith("/log_dir_event_notification/log_dir_event_0000000000")
        assert zk.zk.get("/log_dir_event_notification/log_dir_event_0000000000")[0] == (
            b'{"version":1,"broker":3,"event":1}')
        zk.propagate_log_dir_event(2)
        assert zk.get_log_dir_event_notifications() == {
            "log_dir_event_0000000000": 3, "log_dir_event_0000000001": 2}
        _, epoch_version = zk.register_controller_and_increment_controller_epoch(1)
        zk.delete_log_dir_event_notifications(["log_dir_event_0000000000"], epoch_version)
        assert zk.get_log_dir_event_notifications() == {"log_dir_event_0000000001": 2}
    finally:
        zk.close()


class TwoDirCluster(EmbeddedCluster):
    """Each broker with two log dirs, ``a`` and ``b``."""

    def broker_props(self, broker_id: int) -> dict[str, str]:
        props = super().broker_props(broker_id)
        props["log.dirs"] = f"{props['log.dirs']}/a,{props['log.dirs']}/b"
        return props


def _metadata(port: int) -> dict[int, Any]:
    async def ask() -> Any:
        conn = await AsyncBrokerConnection.connect("127.0.0.1", port, client_id="t",
                                                   api_ranges={3: (9, 12), 18: (0, 3)})  # fmt: skip
        try:
            return await conn.request(3, {"topics": [{"name": TOPIC}],
                                          "allow_auto_topic_creation": False})  # fmt: skip
        finally:
            await conn.close()

    topic = asyncio.run(ask()).topics[0]
    return {int(p.partition_index): p for p in topic.partitions}


def _produce_to_every_partition(cluster: EmbeddedCluster) -> None:
    failed: list[str] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for partition in range(len(ASSIGNMENT)):
        p.produce(TOPIC, b"x" * 100, partition=partition,
                  on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)  # fmt: skip
    assert p.flush(60) == 0
    assert failed == []


def test_a_failed_log_dir_moves_its_replicas_offline(zookeeper_server: ZooKeeperServer) -> None:
    config = {"log.flush.offset.checkpoint.interval.ms": "100", "log.initial.task.delay.ms": "0"}
    with TwoDirCluster(brokers=3, config=config, zookeeper=zookeeper_server) as cluster:
        ports = {b: p.port for b, p in cluster.brokers.items()}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, len(ASSIGNMENT), replica_assignment=ASSIGNMENT)])[TOPIC].result(30)
        if cluster.controller_id() == 3:  # the controller must outlive broker 3's failure
            cluster.restart(3)
            ports[3] = cluster.brokers[3].port
        _wait(lambda: all(len(p.isr_nodes) == 3 for p in _metadata(ports[1]).values()), "full ISRs")
        _produce_to_every_partition(cluster)
        assert cluster.directory is not None
        dir_b = cluster.directory / "broker-3" / "b"
        failing = {int(d.name.rsplit("-", 1)[1]) for d in dir_b.iterdir() if d.name.startswith(f"{TOPIC}-")}
        healthy = set(range(len(ASSIGNMENT))) - failing
        assert failing and healthy  # the broker spread its replicas over both dirs
        before = _metadata(ports[1])

        # the disk goes: the dir is gone and a file stands in its place (the next checkpoint
        # write into it fails, as Kafka's LogDirFailureTest breaks a dir); moved away at once,
        # not deleted file by file while the broker still writes into it
        dir_b.rename(dir_b.with_name("b-failed"))
        dir_b.write_bytes(b"")

        def moved(port: int) -> bool:
            md = _metadata(port)
            return all(md[p].leader_id not in (3, -1) and 3 not in md[p].isr_nodes
                       and list(md[p].offline_replicas) == [3] for p in failing)  # fmt: skip

        for b in (1, 2, 3):
            _wait(lambda b=b: moved(ports[b]), f"broker {b} shows broker 3's replicas offline")
        after = _metadata(ports[1])
        for p in healthy:  # the other dir's replicas are untouched
            assert after[p].leader_id == before[p].leader_id
            assert 3 in after[p].isr_nodes and list(after[p].offline_replicas) == []
        for p in failing & {0, 1, 4}:  # led by broker 3: the next ISR member in order leads
            assert after[p].leader_id == ASSIGNMENT[p][1]
            assert after[p].leader_epoch > before[p].leader_epoch
        # the controller consumed the notification
        zk = cluster.zk.zk
        _wait(lambda: zk.get_children("/log_dir_event_notification") == [], "notification deleted")
        stat = zk.exists("/log_dir_event_notification")
        assert stat is not None and stat.cversion >= 2  # one created, one deleted
        _produce_to_every_partition(cluster)  # every partition takes acks=all writes
        assert any("is offline" in line for line in cluster.brokers[3].output)

        # a new controller learns the offline replicas from its first LeaderAndIsr answers
        old = cluster.controller_id()
        assert old in (1, 2)
        cluster.stop_broker(old)
        other = 3 - old  # the broker whose Metadata is read from now on
        assert cluster.wait_for_controller(other_than=old) in (other, 3)

        def known_to_new_controller() -> bool:
            md = _metadata(ports[other])
            return (all(sorted(md[p].offline_replicas) == sorted([3, old]) for p in failing)
                    and all(list(md[p].offline_replicas) == [old] for p in healthy))  # fmt: skip

        _wait(known_to_new_controller, "the new controller's offline replicas")

        # broker 3 restarts with the dir still broken: it serves from the other dir and
        # answers the replicas it cannot find KAFKA_STORAGE_ERROR (never an empty new log)
        cluster.restart(3)
        ports[3] = cluster.brokers[3].port
        _wait(known_to_new_controller, "the restarted broker's replicas offline again")
        _wait(lambda: all(3 in _metadata(ports[other])[p].isr_nodes for p in healthy),
              "the healthy dir's replicas back in their ISRs")  # fmt: skip
        assert all(3 not in _metadata(ports[other])[p].isr_nodes for p in failing)
        assert not any((cluster.directory / "broker-3" / "a" / f"{TOPIC}-{p}").exists() for p in failing)
