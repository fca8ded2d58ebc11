"""ACLs in ZooKeeper as Kafka's ZooKeeper authorizer keeps them: made on one broker,
enforced on another."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka.admin import AclBinding as ConfluentAclBinding
from confluent_kafka.admin import AclOperation as AclOperation_
from confluent_kafka.admin import AclPermissionType as AclPermissionType_
from confluent_kafka.admin import AdminClient, NewTopic, ResourcePatternType
from confluent_kafka.admin import ResourceType as ConfluentResourceType

from tidelog.server.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
)
from tidelog.server.security.types import AclOperation, KafkaPrincipal, ResourceType
from tidelog.server.zk.acls import ZkAclAuthorizer, camel
from tidelog.server.zk.client import KafkaZkClient
from tidelog.testing import EmbeddedBroker


def _wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_acl_names_are_kafkas() -> None:
    assert camel(AclOperation.CLUSTER_ACTION.name) == "ClusterAction"
    assert camel(ResourceType.TRANSACTIONAL_ID.name) == "TransactionalId"
    assert camel(AclOperation.IDEMPOTENT_WRITE.name) == "IdempotentWrite"


def test_acls_made_on_one_broker_apply_on_another(zookeeper_connect: str) -> None:
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(2)]
    for zk in zks:
        zk.start()
    try:
        one, two = (ZkAclAuthorizer(zk) for zk in zks)
        one.load()
        two.load()
        alice = KafkaPrincipal.parse("User:alice")
        assert not two.authorize(alice, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders")
        read = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
        write = AclBinding(ResourceType.GROUP, "app-", PatternType.PREFIXED, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
        one.create([read, write])
        assert zks[0].zk.get("/kafka-acl/Topic/orders")[0] == (
            b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
            b'"operation":"Read","host":"*"}]}'
        )
        assert zks[0].zk.exists("/kafka-acl-extended/prefixed/Group/app-") is not None
        assert zks[0].zk.get_children("/kafka-acl-changes") == ["acl_changes_0000000000"]
        assert zks[0].zk.get("/kafka-acl-changes/acl_changes_0000000000")[0] == b"Topic:orders"
        _wait(lambda: two.authorize(alice, "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "orders"),
              "broker two enforces the new ACL")  # fmt: skip
        _wait(lambda: two.authorize(alice, "h", AclOperation.READ, ResourceType.GROUP, "app-billing"),
              "and the prefixed one (its own notice)")  # fmt: skip
        assert sorted(two.acls(), key=str) == sorted([read, write], key=str)
        # deleted on broker two: gone on broker one, and the znode with it
        two.delete([AclBindingFilter(resource_type=ResourceType.TOPIC)])
        _wait(lambda: not one.authorize(alice, "h", AclOperation.READ, ResourceType.TOPIC, "orders"),
              "broker one drops the ACL")  # fmt: skip
        assert zks[0].zk.exists("/kafka-acl/Topic/orders") is None
        assert one.acls() == [write]
    finally:
        for zk in zks:
            zk.close()


def test_an_acl_created_through_one_broker_is_enforced_by_another(zookeeper_connect: str) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')  # fmt: skip
    props = {
        "zookeeper.connect": zookeeper_connect, "controlled.shutdown.retry.backoff.ms": "100",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }  # fmt: skip
    brokers = [EmbeddedBroker({**props, "broker.id": str(b)}).start() for b in (1, 2)]

    def client(user: str, broker: EmbeddedBroker) -> dict[str, str]:
        return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}  # fmt: skip

    try:
        admin = AdminClient(client("admin", brokers[0]))
        _wait(lambda: sorted(admin.list_topics(timeout=10).brokers) == [1, 2], "both brokers known")
        admin.create_topics([NewTopic("guarded", 1, 2)])["guarded"].result(30)

        def alice_can_describe() -> bool:
            md = AdminClient(client("alice", brokers[1])).list_topics(topic="guarded", timeout=10)
            return md.topics["guarded"].error is None

        assert not alice_can_describe()  # no ACL yet: TOPIC_AUTHORIZATION_FAILED on broker 2
        binding = ConfluentAclBinding(ConfluentResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
                                      "User:alice", "*", AclOperation_.DESCRIBE, AclPermissionType_.ALLOW)  # fmt: skip
        admin.create_acls([binding])[binding].result(30)  # through broker 1
        _wait(alice_can_describe, "broker 2 enforces the ACL made through broker 1")
    finally:
        for b in brokers:
            b.stop()
