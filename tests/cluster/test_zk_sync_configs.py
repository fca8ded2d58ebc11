"""Dynamic broker configs and client quotas on a three-broker cluster: altered through one
broker, written to ZooKeeper in Kafka's JSON and announced under /config/changes, applied by
every broker (a broker's own configs only by that broker), and read again after a restart."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.scram import ScramCredential, ScramMechanism
from tidelog.server.zk.change_notifications import ZkNodeChangeNotificationListener
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.credentials import ZkCredentialStore, credential_to_string
from tidelog.server.zk.quotas import ZkClientQuotaStore, java_double
from tidelog.testing import EmbeddedBroker, EmbeddedCluster

DEADLINE_S = 20


def _wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _admin(cluster: EmbeddedCluster, broker_id: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[broker_id].port}"})


async def _request(port: int, api_key: int, versions: tuple[int, int], body: dict[str, Any]) -> Any:
    conn = await AsyncBrokerConnection.connect(
        "127.0.0.1", port, client_id="admin", api_ranges={api_key: versions, 18: (0, 3)})
    try:
        return await conn.request(api_key, body)
    finally:
        await conn.close()


def _alter_broker(port: int, name: str, key: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of a BROKER resource ("" the cluster default), as kafka-configs
    sends it (the admin client refuses an empty broker name)."""
    op = 0 if value is not None else 1  # SET, DELETE
    body = {"validate_only": False, "resources": [{"resource_type": 4, "resource_name": name,
            "configs": [{"name": key, "config_operation": op, "value": value}]}]}  # fmt: skip
    r = asyncio.run(_request(port, 44, (0, 1), body)).responses[0]
    return r.error_code, r.error_message


def _broker_entry(admin: AdminClient, broker_id: int, key: str) -> tuple[str, int]:
    res = ConfigResource(ResourceType.BROKER, str(broker_id))
    entry = admin.describe_configs([res])[res].result(30)[key]
    return entry.value, entry.source


def _changes(cluster: EmbeddedCluster) -> list[dict[str, Any]]:
    zk = cluster.zk.zk
    return [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]


def test_broker_configs_altered_through_one_broker_apply_on_all_and_survive_a_restart(
    tidelog_cluster: EmbeddedCluster,
) -> None:
    cluster = tidelog_cluster
    ports = {b: p.port for b, p in cluster.brokers.items()}
    key = "log.retention.ms"
    # the cluster default, through broker 1: every broker applies it
    assert _alter_broker(ports[1], "", key, "123456789") == (0, None)
    assert cluster.zk.zk.get("/config/brokers/<default>")[0] == (
        b'{"version":1,"config":{"log.retention.ms":"123456789"}}')
    assert {"version": 2, "entity_path": "brokers/<default>"} in _changes(cluster)
    default = ("123456789", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    for b in (1, 2, 3):
        _wait(lambda b=b: _broker_entry(_admin(cluster, b), b, key) == default,
              f"broker {b} applies the cluster default")  # fmt: skip
    # and a topic without an override takes it on a broker that did not receive the alter
    three = _admin(cluster, 3)
    three.create_topics([NewTopic("plain", 1, 3)])["plain"].result(30)
    res = ConfigResource(ResourceType.TOPIC, "plain")
    assert three.describe_configs([res])[res].result(30)["retention.ms"].value == "123456789"

    # broker 2's own, sent to broker 2 (as the admin client routes it): only broker 2
    assert _alter_broker(ports[2], "2", key, "987654321") == (0, None)
    assert json.loads(cluster.zk.zk.get("/config/brokers/2")[0]) == {
        "version": 1, "config": {key: "987654321"}}
    assert {"version": 2, "entity_path": "brokers/2"} in _changes(cluster)
    own = ("987654321", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert _broker_entry(_admin(cluster, 2), 2, key) == own
    for b in (1, 3):
        assert _broker_entry(_admin(cluster, b), b, key) == default

    # an incremental change applies to what ZooKeeper holds, also a key this broker has not
    # been told about (written by a tool without a notification)
    cluster.zk.zk.set("/config/brokers/2", b'{"version":1,"config":{"log.retention.ms":"987654321",'
                      b'"log.retention.bytes":"1073741824"}}')  # fmt: skip
    assert _alter_broker(ports[2], "2", "log.segment.bytes", "104857600") == (0, None)
    assert json.loads(cluster.zk.zk.get("/config/brokers/2")[0])["config"] == {
        key: "987654321", "log.retention.bytes": "1073741824", "log.segment.bytes": "104857600"}

    cluster.restart(2)  # read again from ZooKeeper before it serves
    assert _broker_entry(_admin(cluster, 2), 2, key) == own
    assert _alter_broker(cluster.brokers[2].port, "2", key, None) == (0, None)  # the default again
    _wait(lambda: _broker_entry(_admin(cluster, 2), 2, key) == default, "the override gone")


def test_another_brokers_own_configs_are_refused_as_kafka_does(tidelog_cluster: EmbeddedCluster) -> None:
    assert _alter_broker(tidelog_cluster.brokers[1].port, "2", "log.retention.ms", "1") == (
        42, "Unexpected broker id, expected 1, but received 2")  # INVALID_REQUEST
    assert tidelog_cluster.zk.zk.exists("/config/brokers/2") is None


def _set_quota(port: int, entity: list[tuple[str, str | None]], key: str, value: float | None) -> None:
    body = {"validate_only": False, "entries": [{
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
        "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}]}
    resp = asyncio.run(_request(port, 49, (1, 1), body))
    assert [e.error_code for e in resp.entries] == [0]


def _described(port: int) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    resp = asyncio.run(_request(port, 48, (1, 1), {"components": [], "strict": False}))
    return {tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
            for x in resp.entries}  # fmt: skip


def _throttled(cluster: EmbeddedCluster, client_id: str, topic: str) -> int:
    """The throttle time (ms) a broker reported to a producer of one 200 KB record, sent in
    one request: 20 KB/s over Kafka's sampled window, twice a 10 KB/s quota."""
    seen: list[int] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": client_id,
                  "acks": "all", "message.max.bytes": 1_000_000,
                  "throttle_cb": lambda e: seen.append(int(e.throttle_time * 1000))})  # fmt: skip
    p.produce(topic, b"x" * 200_000)
    assert p.flush(60) == 0
    p.poll(0.2)
    return max(seen, default=0)


def test_a_quota_set_through_one_broker_throttles_on_another(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    admin = _admin(cluster, 1)
    admin.create_topics([NewTopic("q", 1, replica_assignment=[[2, 1, 3]])])["q"].result(30)  # led by 2
    ports = {b: p.port for b, p in cluster.brokers.items()}
    assert _throttled(cluster, "slow", "q") == 0  # no quota yet

    _set_quota(ports[1], [("client-id", "slow")], "producer_byte_rate", 10240)
    _set_quota(ports[1], [("user", "al ice~"), ("client-id", None)], "request_percentage", 50)
    zk = cluster.zk.zk
    assert zk.get("/config/clients/slow")[0] == b'{"version":1,"config":{"producer_byte_rate":"10240"}}'
    assert zk.get("/config/users/al%20ice%7E/clients/<default>")[0] == (
        b'{"version":1,"config":{"request_percentage":"50.0"}}')
    changes = _changes(cluster)
    assert {"version": 2, "entity_path": "clients/slow"} in changes
    assert {"version": 2, "entity_path": "users/al%20ice%7E/clients/<default>"} in changes
    expected = {(("client-id", "slow"),): {"producer_byte_rate": 10240.0},
                (("client-id", None), ("user", "al ice~")): {"request_percentage": 50.0}}
    for b in (1, 2, 3):
        _wait(lambda b=b: _described(ports[b]) == expected, f"broker {b} describes both quotas")
    assert _throttled(cluster, "slow", "q") > 0  # broker 2 enforces what broker 1 was told
    assert _throttled(cluster, "fast", "q") == 0

    cluster.restart(2)
    assert _described(cluster.brokers[2].port) == expected
    assert _throttled(cluster, "slow", "q") > 0

    # removed through broker 3: the znode goes (nothing left in it), no broker throttles; q's
    # leader after broker 2's restart may be any of the three, so each is waited for
    _set_quota(cluster.brokers[3].port, [("client-id", "slow")], "producer_byte_rate", None)
    assert zk.exists("/config/clients/slow") is None
    for b in (1, 2, 3):
        _wait(lambda b=b: (("client-id", "slow"),) not in _described(cluster.brokers[b].port),
              f"broker {b} forgets the removed quota")
    assert _throttled(cluster, "slow", "q") == 0


def test_config_change_notifications_past_their_expiry_are_purged(zookeeper_connect: str) -> None:
    zk = KafkaZkClient(zookeeper_connect)
    zk.start()
    try:
        root = "/config/changes"

        def ctimes() -> dict[str, int]:
            return {c: int(zk.zk.exists(f"{root}/{c}").ctime) for c in zk.get_children(root)}

        deadline = time.monotonic() + 10
        zk.create_config_change_notification("topics/a")
        while len(set(ctimes().values())) < 2:  # until one is created a millisecond later
            assert time.monotonic() < deadline
            zk.create_config_change_notification("topics/b")
        made = ctimes()
        first, last = min(made.values()), max(made.values())
        zk.purge_obsolete_notifications(root, made, expiration_ms=10**9)
        assert ctimes() == made  # none expired
        zk.purge_obsolete_notifications(root, made, expiration_ms=last - first - 1, now_ms=last)
        assert ctimes() == {c: t for c, t in made.items() if last - t <= last - first - 1}
        assert min(made, key=made.__getitem__) not in ctimes() and ctimes()
    finally:
        zk.close()


def test_a_users_quotas_and_scram_credentials_share_its_znode(zookeeper_connect: str) -> None:
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(2)]
    for zk in zks:
        zk.start()
    try:
        creds = ZkCredentialStore(zks[0])  # broker one's SCRAM users
        quotas = ZkClientQuotaStore(zks[1])  # broker two's quotas
        creds.load()
        quotas.load()
        cred = ScramCredential(b"salt", b"stored", b"server", 4096)
        creds.apply([("alice", ScramMechanism.SCRAM_SHA_256, cred)], [])
        quotas.alter([((("user", "alice"),), {"consumer_byte_rate": 2048.0, "request_percentage": 12.5})])
        config = json.loads(zks[0].zk.get("/config/users/alice")[0])["config"]
        assert config == {"SCRAM-SHA-256": credential_to_string(cred),
                          "consumer_byte_rate": "2048", "request_percentage": "12.5"}
        # the quotas removed: the credential stays, and so does the znode
        quotas.alter([((("user", "alice"),), {"consumer_byte_rate": None, "request_percentage": None})])
        assert json.loads(zks[0].zk.get("/config/users/alice")[0])["config"] == {
            "SCRAM-SHA-256": credential_to_string(cred)}
        assert quotas.entries == {}
        # a credential change keeps a quota set since
        quotas.alter([((("user", "alice"),), {"producer_byte_rate": 1e8})])
        _wait(lambda: creds.get("alice", ScramMechanism.SCRAM_SHA_256) == cred, "creds read")
        creds.apply([], [("alice", ScramMechanism.SCRAM_SHA_256)])
        assert json.loads(zks[0].zk.get("/config/users/alice")[0])["config"] == {
            "producer_byte_rate": "100000000"}
        assert java_double(1e8) == "1.0E8" and java_double(0.0005) == "5.0E-4"
        assert java_double(1234567.5) == "1234567.5" and java_double(12.5) == "12.5"
    finally:
        for zk in zks:
            zk.close()


def test_quotas_written_by_a_tool_reach_the_store_through_the_notifications(zookeeper_connect: str) -> None:
    """A tool writing znodes and notices itself (kafka-configs --zookeeper, version 1 or 2
    notices) is followed, as a broker's own writes are."""
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(2)]
    for zk in zks:
        zk.start()
    try:
        store = ZkClientQuotaStore(zks[0])
        listener = ZkNodeChangeNotificationListener(zks[0])
        for handler in store.handlers():
            listener.add_handler(handler)
        listener.load()
        tool = zks[1]
        tool.set_or_create_entity_configs("clients", "etl", {"consumer_byte_rate": "4096"}, notify=False)
        tool.zk.create("/config/changes/config_change_", sequence=True,
                       value=b'{"version":1,"entity_type":"clients","entity_name":"etl"}')  # fmt: skip
        _wait(lambda: store.entries == {(("client-id", "etl"),): {"consumer_byte_rate": 4096.0}},
              "the version 1 notice")  # fmt: skip
        tool.set_or_create_entity_configs("ips", "10.0.0.7", {"connection_creation_rate": "12"})
        tool.set_or_create_entity_configs("users", "<default>/clients/etl", {"producer_byte_rate": "1"})
        _wait(lambda: len(store.entries) == 3, "the version 2 notices")
        assert store.entries[(("ip", "10.0.0.7"),)] == {"connection_creation_rate": 12.0}
        assert store.entries[(("client-id", "etl"), ("user", None))] == {"producer_byte_rate": 1.0}
        version = store.version
        tool.set_or_create_entity_configs("clients", "etl", {})  # emptied: gone from the store
        _wait(lambda: (("client-id", "etl"),) not in store.entries, "the removal")
        assert store.version > version
    finally:
        for zk in zks:
            zk.close()


def _expire_session(connect: str, client: KafkaZkClient) -> None:
    """Expire ``client``'s session as ZooKeeper would: another client takes it over with the
    same id and password and closes it."""
    session_id, password = client.zk.client_id
    thief = KazooClient(hosts=connect.split("/", 1)[0], client_id=(session_id, password))
    thief.start()
    thief.stop()
    thief.close()


def test_changes_after_a_session_expiry_still_reach_the_broker(zookeeper_connect: str) -> None:
    broker = EmbeddedBroker({"broker.id": "4", "zookeeper.connect": zookeeper_connect,
                             "zookeeper.session.timeout.ms": "6000"}).start()  # fmt: skip
    tool = KafkaZkClient(zookeeper_connect)
    tool.start()
    try:
        node = broker.broker.cluster
        assert node is not None
        epoch = node.broker_epoch
        _expire_session(zookeeper_connect, node.zk)
        _wait(lambda: node.broker_epoch > epoch, "registered again")
        # the watch of /config/changes went with the old session: the new one set it again
        tool.set_or_create_entity_configs("brokers", "<default>", {"log.retention.ms": "424242"})
        tool.set_or_create_entity_configs("clients", "late", {"producer_byte_rate": "2048"})
        dc, quotas = broker.broker.dynamic_config, broker.broker.client_quotas
        assert dc is not None and quotas is not None
        _wait(lambda: dc.layers[""] == {"log.retention.ms": "424242"}, "the broker config applied")
        assert broker.broker.config.values["log.retention.ms"] == 424242
        _wait(lambda: quotas.store.get((("client-id", "late"),)) == {"producer_byte_rate": 2048.0},
              "the quota")  # fmt: skip
    finally:
        tool.close()
        broker.stop()
