"""StandardAuthorizer semantics: literal/wildcard/prefixed patterns, deny wins, implied
operations, hosts, super users, allow.everyone.if.no.acl.found, filters, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.server.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    StandardAuthorizer,
    parse_super_users,
)
from tidelog.server.security.types import AclOperation, KafkaPrincipal, ResourceType

Op, R, P, A = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")


def acl(name: str, op: AclOperation, perm: AclPermissionType = A.ALLOW, *,
        rt: ResourceType = R.TOPIC, pt: PatternType = P.LITERAL,
        principal: str = "User:alice", host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def auth(acls: list[AclBinding], **kw: object) -> StandardAuthorizer:
    a = StandardAuthorizer(None, **kw)  # type: ignore[arg-type]
    a.create(acls)
    return a


def test_literal_allow_and_default_deny() -> None:
    a = auth([acl("orders", Op.WRITE)])
    assert a.authorize(ALICE, "10.0.0.1", Op.WRITE, R.TOPIC, "orders")
    assert not a.authorize(BOB, "10.0.0.1", Op.WRITE, R.TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", Op.READ, R.TOPIC, "orders")
    # no ACL on the resource at all: allow.everyone.if.no.acl.found decides
    assert not a.authorize(ALICE, "h", Op.READ, R.TOPIC, "other")
    assert auth([acl("orders", Op.WRITE)], allow_everyone_if_no_acl_found=True).authorize(
        BOB, "h", Op.READ, R.TOPIC, "other")
    # ... but only when no ACL matches the resource
    assert not auth([acl("orders", Op.WRITE)], allow_everyone_if_no_acl_found=True).authorize(
        BOB, "h", Op.WRITE, R.TOPIC, "orders")


def test_deny_overrides_allow() -> None:
    a = auth([acl("orders", Op.ALL), acl("orders", Op.WRITE, A.DENY)])
    assert a.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "orders")
    # a wildcard-principal prefixed DENY ALL beats a literal ALLOW for this principal
    b = auth([acl("orders", Op.READ), acl("ord", Op.ALL, A.DENY, pt=P.PREFIXED, principal="User:*")])
    assert not b.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders")


def test_prefixed_and_wildcard_resources() -> None:
    a = auth([acl("logs-", Op.READ, pt=P.PREFIXED), acl("*", Op.DESCRIBE, principal="User:*")])
    assert a.authorize(ALICE, "h", Op.READ, R.TOPIC, "logs-app")
    assert not a.authorize(ALICE, "h", Op.READ, R.TOPIC, "log")
    assert a.authorize(BOB, "h", Op.DESCRIBE, R.TOPIC, "anything")
    assert not a.authorize(BOB, "h", Op.READ, R.TOPIC, "anything")
    # the literal name "logs-" is not a prefix pattern for another resource type
    assert not a.authorize(ALICE, "h", Op.READ, R.GROUP, "logs-app")


def test_implied_operations() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert auth([acl("t", op)]).authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "t")
    assert auth([acl("t", Op.ALTER_CONFIGS)]).authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, R.TOPIC, "t")
    assert not auth([acl("t", Op.CREATE)]).authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "t")
    # DENY implies nothing beyond itself: DENY READ leaves DESCRIBE to the ALLOWs
    a = auth([acl("t", Op.READ, A.DENY), acl("t", Op.DESCRIBE)])
    assert a.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "t")


def test_hosts() -> None:
    a = auth([acl("t", Op.READ, host="10.0.0.1")])
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, R.TOPIC, "t")


def test_super_users() -> None:
    a = auth([acl("t", Op.ALL, A.DENY, principal="User:*")],
             super_users=parse_super_users("User:admin; User:CN=ops"))
    assert a.authorize(KafkaPrincipal("User", "admin"), "h", Op.WRITE, R.TOPIC, "t")
    assert a.authorize(KafkaPrincipal("User", "CN=ops"), "h", Op.ALTER, R.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "t")
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_filters_and_delete() -> None:
    a = auth([acl("logs-", Op.READ, pt=P.PREFIXED), acl("logs-app", Op.WRITE),
              acl("g", Op.READ, rt=R.GROUP, principal="User:bob")])
    assert len(a.acls(AclBindingFilter())) == 3
    assert len(a.acls(AclBindingFilter(resource_type=R.TOPIC))) == 2
    # MATCH: every ACL that applies to the named resource
    assert len(a.acls(AclBindingFilter(R.TOPIC, "logs-app", P.MATCH))) == 2
    assert len(a.acls(AclBindingFilter(R.TOPIC, "logs-app", P.LITERAL))) == 1
    assert len(a.acls(AclBindingFilter(principal="User:bob"))) == 1
    removed = a.delete([AclBindingFilter(R.TOPIC, "logs-", P.PREFIXED)])
    assert [x.resource_name for x in removed[0]] == ["logs-"]
    assert len(a.acls()) == 2


def test_persisted(tmp_path: Path) -> None:
    a = StandardAuthorizer(tmp_path)
    a.create([acl("orders", Op.WRITE), acl("ord", Op.READ, A.DENY, pt=P.PREFIXED)])
    b = StandardAuthorizer(tmp_path)
    assert b.acls() == a.acls()
    assert b.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "orders")
    b.delete([AclBindingFilter()])
    assert StandardAuthorizer(tmp_path).acls() == []
