"""KafkaZkClient against a real ZooKeeper: registration, election, fencing, topics."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tidelog.server.zk import data as z
from tidelog.server.zk.client import (
    BrokerIdTakenError,
    ControllerMovedError,
    KafkaZkClient,
    TopicExistsError,
)
from tidelog.util.topic_partition import TopicPartition


@pytest.fixture
def clients(zookeeper_connect: str) -> Iterator[list[KafkaZkClient]]:
    made: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        c = KafkaZkClient(zookeeper_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
        c.start()
        made.append(c)
        return c

    made_list: list[KafkaZkClient] = [make(), make()]
    yield made_list
    for c in made:
        c.close()


def _reg(broker_id: int, port: int = 9092) -> z.BrokerRegistration:
    return z.BrokerRegistration(broker_id, (z.EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),))


def test_top_level_paths_and_cluster_id(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    for path in z.PERSISTENT_ZK_PATHS:
        assert a.zk.exists(path) is not None, path
    assert a.get_or_create_cluster_id("first") == "first"
    assert b.get_or_create_cluster_id("second") == "first"
    assert a.zk.get(z.CLUSTER_ID_PATH)[0] == b'{"version":"1","id":"first"}'


def test_broker_registration_epoch_is_czxid(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    epoch = a.register_broker(_reg(1))
    data, stat = a.zk.get("/brokers/ids/1")
    assert epoch == stat.czxid > 0
    assert stat.ephemeralOwner == a.session_id
    assert z.decode_broker(1, data).endpoints == _reg(1).endpoints
    assert a.register_broker(_reg(1)) == epoch  # our own znode (a retried create)
    with pytest.raises(BrokerIdTakenError):
        b.register_broker(_reg(1))
    assert b.register_broker(_reg(2, 9093)) > epoch
    brokers = a.get_all_brokers()
    assert sorted(brokers) == [1, 2]
    assert brokers[2].epoch == b.zk.get("/brokers/ids/2")[1].czxid


def test_broker_znode_goes_with_its_session(clients: list[KafkaZkClient], zookeeper_connect: str) -> None:
    a, _ = clients
    gone = threading.Event()
    c = KafkaZkClient(zookeeper_connect, session_timeout_ms=6000)
    c.start()
    c.register_broker(_reg(5))
    assert a.get_children(z.BROKER_IDS_PATH, watch=lambda _e: gone.set()) == ["5"]
    c.close()  # the session ends: the ephemeral goes, the watch fires
    assert gone.wait(10)
    assert a.get_all_brokers() == {}


def test_controller_election_is_one_multi(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    epoch, version = a.register_controller_and_increment_controller_epoch(1)
    assert (epoch, version) == (1, 1)
    assert a.get_controller_id() == 1
    assert a.zk.get(z.CONTROLLER_EPOCH_PATH)[0] == b"1"
    with pytest.raises(ControllerMovedError):
        b.register_controller_and_increment_controller_epoch(2)
    assert a.get_controller_epoch() == (1, 1)  # the loser wrote nothing
    a.delete_controller(version)
    assert b.register_controller_and_increment_controller_epoch(2) == (2, 2)
    assert b.get_controller_id() == 2


def test_a_deposed_controller_writes_nothing(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    tp = TopicPartition("t", 0)
    _, old_version = a.register_controller_and_increment_controller_epoch(1)
    a.create_topic("t", uuid.uuid4(), {0: z.ReplicaAssignment((1, 2))}, {})
    state = z.LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)
    assert a.create_topic_partition_states({tp: state}, old_version) == {tp: None}
    assert a.get_topic_partition_states([tp])[tp].zk_version == 0
    # broker 1's session is "lost": broker 2 takes over and bumps the epoch
    a.zk.delete(z.CONTROLLER_PATH)
    _, new_version = b.register_controller_and_increment_controller_epoch(2)
    with pytest.raises(ControllerMovedError):
        a.update_leader_and_isr({tp: state.new_leader_and_isr(2, [2])}, old_version)
    assert a.get_topic_partition_states([tp])[tp] == state  # unchanged
    result = b.update_leader_and_isr({tp: state.new_leader_and_isr(2, [2])}, new_version)
    assert result.finished[tp].zk_version == 1  # the partition epoch moved on
    assert result.finished[tp].leader_epoch == 1
    stale = b.update_leader_and_isr({tp: state.new_leader_and_isr(1, [1])}, new_version)
    assert stale.bad_version == {tp} and not stale.finished  # expected zkVersion 0 is stale


def test_topics_configs_and_deletion(clients: list[KafkaZkClient], zookeeper_connect: str) -> None:
    a, _ = clients
    tid = uuid.uuid4()
    a.create_topic("t", tid, {0: z.ReplicaAssignment((1, 2))}, {"cleanup.policy": "compact"})
    with pytest.raises(TopicExistsError):
        a.create_topic("t", uuid.uuid4(), {0: z.ReplicaAssignment((1,))}, {})
    assert a.get_all_topics() == ["t"]
    got = a.get_topic_assignment("t")
    assert got is not None and got[0].topic_id == tid
    assert a.get_entity_configs("topics", "t") == {"cleanup.policy": "compact"}
    a.set_or_create_entity_configs("topics", "t", {"retention.ms": "1000"})
    changes = a.get_children(z.CONFIG_CHANGES_PATH)
    assert changes == ["config_change_0000000000"]
    assert a.zk.get(f"{z.CONFIG_CHANGES_PATH}/{changes[0]}")[0] == (
        b'{"version":2,"entity_path":"topics/t"}'
    )
    _, version = a.register_controller_and_increment_controller_epoch(1)
    tp = TopicPartition("t", 0)
    a.create_topic_partition_states({tp: z.LeaderIsrAndControllerEpoch(1, 0, (1, 2), 1)}, version)
    a.create_delete_topic_path("t")
    assert a.get_topic_deletions() == ["t"]
    a.delete_topic_znodes("t", version)
    a.delete_topic_deletions(["t"], version)
    assert a.get_all_topics() == [] and a.get_topic_deletions() == []
    assert a.zk.exists("/config/topics/t") is None
    # the chroot holds it all: a plain client sees the znodes under it
    hosts, chroot = zookeeper_connect.split("/", 1)
    raw = KazooClient(hosts=hosts)
    raw.start()
    try:
        assert raw.exists(f"/{chroot}/brokers/ids") is not None
    finally:
        raw.stop()
        raw.close()


def test_producer_id_blocks_are_unique_across_brokers(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    blocks: list[z.ProducerIdBlock] = []

    def claim(c: KafkaZkClient, broker: int) -> None:
        for _ in range(10):
            blocks.append(c.allocate_producer_id_block(broker, 1000))

    threads = [threading.Thread(target=claim, args=(c, i)) for i, c in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = sorted(blk.first_producer_id for blk in blocks)
    assert starts == list(range(0, 20000, 1000))
    latest = z.decode_producer_id_block(a.zk.get(z.PRODUCER_ID_BLOCK_PATH)[0])
    assert latest.last_producer_id == 19999


def test_acls_are_conditional(clients: list[KafkaZkClient]) -> None:
    a, b = clients
    path = z.acl_path("Topic", "t")
    assert a.get_versioned_acls(path) == ([], -1)
    entry = z.ZkAclEntry("User:alice", "Allow", "Read")
    assert a.conditional_set_or_create_acls(path, [entry], -1)
    assert not b.conditional_set_or_create_acls(path, [], -1)  # created meanwhile
    acls, version = b.get_versioned_acls(path)
    assert acls == [entry] and version == 0
    assert b.conditional_set_or_create_acls(path, [], version)
    assert not a.conditional_set_or_create_acls(path, [entry], version)  # stale version
