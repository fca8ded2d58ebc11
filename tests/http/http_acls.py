"""A console broker behind Kafka's StandardAuthorizer: the tests' own clients are the super
user ``admin`` over SASL_PLAINTEXT, and ACLs for ``User:ANONYMOUS`` (the principal the console
asks for, at the HTTP client's address) are created through confluent-kafka's AdminClient,
as an operator would create them."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from http_support import HTTP

from tidelog.testing import EmbeddedBroker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PASSWORD = "admin-secret"
CONSOLE = "User:ANONYMOUS"
# every operation Kafka defines on a topic
TOPIC_OPERATIONS = [AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS]


def secured(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Broker config: the HTTP listener, one SASL_PLAINTEXT listener with PLAIN user
    ``admin`` (super user), the StandardAuthorizer, nothing allowed without an ACL."""
    return {
        **HTTP,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                            f'required username="admin" password="{PASSWORD}" '
                            f'user_admin="{PASSWORD}";',
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
        **(extra or {}),
    }


def admin_conf(eb: EmbeddedBroker) -> dict[str, Any]:
    """librdkafka settings of the super user (producer, consumer or AdminClient)."""
    return {"bootstrap.servers": eb.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": PASSWORD}


def grant_console(eb: EmbeddedBroker, topic: str, operations: list[AclOperation]) -> None:
    """ALLOW ``operations`` on the literal topic ``topic`` to the console's principal."""
    admin = AdminClient(admin_conf(eb))
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, CONSOLE, "*", op,
                       AclPermissionType.ALLOW) for op in operations]
    for fut in admin.create_acls(acls).values():
        assert fut.result(10) is None
