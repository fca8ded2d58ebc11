"""ACL and SCRAM administration through confluent-kafka's AdminClient over SASL_SSL, as a
super user: CreateAcls/DescribeAcls/DeleteAcls, Describe/AlterUserScramCredentials, a
non-super user refused, and both stores surviving a broker restart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from security_support import PLAIN_USERS, Pki, librdkafka_conf

from tidelog.testing import EmbeddedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    pki = Pki.create()
    yield pki
    pki.remove()


@pytest.fixture
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    from security_support import jaas

    props = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": pki.keystore,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": jaas(PLAIN_USERS),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
    }
    with EmbeddedBroker(props) as b:
        yield b


def admin_as(b: EmbeddedBroker, pki: Pki, user: str, password: str,
             mechanism: str = "PLAIN") -> AdminClient:
    conf: dict[str, Any] = {"bootstrap.servers": b.bootstrap_servers,
                            **librdkafka_conf(pki, "SASL_SSL", mechanism, user, password)}
    return AdminClient(conf)


def _acl(name: str, principal: str, op: AclOperation, perm: AclPermissionType,
         pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op, perm)


def test_acls_and_scram_through_admin_client(broker: EmbeddedBroker, pki: Pki) -> None:
    admin = admin_as(broker, pki, "admin", PLAIN_USERS["admin"])
    acls = [
        _acl("orders", "User:alice", AclOperation.WRITE, AclPermissionType.ALLOW),
        _acl("logs-", "User:alice", AclOperation.READ, AclPermissionType.ALLOW,
             ResourcePatternType.PREFIXED),
        _acl("orders", "User:bob", AclOperation.ALL, AclPermissionType.DENY),
    ]
    for fut in admin.create_acls(acls).values():
        assert fut.result(10) is None
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(everything).result(10)) == set(acls)
    matching = AclBindingFilter(ResourceType.TOPIC, "logs-app", ResourcePatternType.MATCH,
                                None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching).result(10) == [acls[1]]

    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-pw")
    assert admin.alter_user_scram_credentials([upsert])["carol"].result(10) is None
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    too_few = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), b"pw")
    with pytest.raises(KafkaException, match=r"UNACCEPTABLE_CREDENTIAL|iterations"):
        admin.alter_user_scram_credentials([too_few])["dave"].result(10)

    # a non-super user is refused (CLUSTER_AUTHORIZATION_FAILED)
    # (librdkafka answers an empty list for a DescribeAcls error: test_acl_matrix checks it)
    alice = admin_as(broker, pki, "alice", PLAIN_USERS["alice"])
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        for fut in alice.create_acls([acls[0]]).values():
            fut.result(10)

    # both stores survive a restart; the SCRAM user can authenticate afterwards
    broker.restart()
    admin = admin_as(broker, pki, "admin", PLAIN_USERS["admin"])
    assert set(admin.describe_acls(everything).result(10)) == set(acls)
    carol = admin_as(broker, pki, "carol", "carol-pw", "SCRAM-SHA-512")
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        for fut in carol.create_acls([acls[0]]).values():  # authenticated, not authorized
            fut.result(10)

    deleted = admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)])
    assert set(next(iter(deleted.values())).result(10)) == {acls[0], acls[2]}
    assert admin.describe_acls(everything).result(10) == [acls[1]]
    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    assert admin.alter_user_scram_credentials([deletion])["carol"].result(10) is None
    with pytest.raises(KafkaException, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["carol"])["carol"].result(10)


def test_authorized_client_round_trip(broker: EmbeddedBroker, pki: Pki) -> None:
    """alice produces with a WRITE ACL; bob, denied, gets TOPIC_AUTHORIZATION_FAILED."""
    admin = admin_as(broker, pki, "admin", PLAIN_USERS["admin"])
    admin.create_topics([confluent_kafka.admin.NewTopic("orders", 1, 1)])["orders"].result(10)
    for fut in admin.create_acls([
        _acl("orders", "User:alice", AclOperation.WRITE, AclPermissionType.ALLOW),
    ]).values():
        fut.result(10)
    results = {}
    for user in ("alice", "bob"):
        p = confluent_kafka.Producer({
            "bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 5000,
            **librdkafka_conf(pki, "SASL_SSL", "PLAIN", user, PLAIN_USERS[user])})
        errors: list[Any] = []
        p.produce("orders", b"x", on_delivery=lambda e, m, out=errors: out.append(e))
        p.flush(10)
        results[user] = errors
    assert results["alice"] == [None]
    assert [e.code() for e in results["bob"]] == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_certificate_principal(pki: Pki) -> None:
    """ssl.principal.mapping.rules turns the client certificate's DN into the principal the
    authorizer sees: client1 (a super user) may produce, a client without a certificate on
    the same ssl.client.auth=requested listener is User:ANONYMOUS and is refused."""
    props = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": pki.keystore,
        "ssl.truststore.location": pki.ca_file,
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:client1",
    }
    with EmbeddedBroker(props) as b:
        outcome = {}
        for who, protocol in (("client1", "MTLS"), ("anonymous", "SSL")):
            p = confluent_kafka.Producer({
                "bootstrap.servers": b.bootstrap_servers, "message.timeout.ms": 5000,
                **librdkafka_conf(pki, protocol, None, None, None)})
            errors: list[Any] = []
            p.produce("mtls-topic", b"x", on_delivery=lambda e, m, out=errors: out.append(e))
            p.flush(10)
            outcome[who] = errors
    assert outcome["client1"] == [None]
    assert [e.code() for e in outcome["anonymous"]] == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_restart_keeps_every_listener_port(pki: Pki) -> None:
    from security_support import broker_props

    with EmbeddedBroker(broker_props(pki)) as b:
        before = dict(b.broker.bound_ports)
        b.restart()
        assert b.broker.bound_ports == before
