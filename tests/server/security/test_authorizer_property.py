"""The indexed authorizer answers exactly what the plain definition of StandardAuthorizer's
rules answers, for arbitrary ACL sets, principals, hosts, operations and names."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.server.security.authorizer import (
    AclBinding,
    AclPermissionType,
    PatternType,
    StandardAuthorizer,
)
from tidelog.server.security.types import AclOperation, KafkaPrincipal, ResourceType

NAMES = st.sampled_from(["a", "ab", "abc", "b", "*", "ba"])
OPS = st.sampled_from([AclOperation.ALL, AclOperation.READ, AclOperation.WRITE,
                       AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
                       AclOperation.DESCRIBE_CONFIGS, AclOperation.DELETE])
TYPES = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
ACL = st.builds(
    AclBinding, TYPES, NAMES, st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["*", "h1"]),
    OPS, st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
IMPLIED = {AclOperation.DESCRIBE: {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                   AclOperation.ALTER},
           AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS}}


def reference(acls: list[AclBinding], default: bool, who: str, host: str,
              op: AclOperation, rt: ResourceType, name: str) -> bool:
    def on_resource(a: AclBinding) -> bool:
        if a.resource_type != rt:
            return False
        if a.pattern_type == PatternType.LITERAL:
            return a.resource_name in (name, "*")
        return name.startswith(a.resource_name)

    found = [a for a in acls if on_resource(a)]
    if not found:
        return default
    mine = [a for a in found if a.principal in (who, "User:*") and a.host in (host, "*")]
    if any(a.permission_type == AclPermissionType.DENY and a.operation in (AclOperation.ALL, op)
           for a in mine):
        return False
    return any(a.permission_type == AclPermissionType.ALLOW
               and (a.operation in (AclOperation.ALL, op) or a.operation in IMPLIED.get(op, ()))
               for a in mine)


@settings(max_examples=300, deadline=None)
@given(st.lists(ACL, max_size=12), st.booleans(), st.sampled_from(["alice", "bob", "carol"]),
       st.sampled_from(["h1", "h2"]), OPS.filter(lambda o: o != AclOperation.ALL), TYPES,
       st.sampled_from(["a", "ab", "abc", "b", "ba", "c", "*"]))
def test_matches_reference(acls: list[AclBinding], default: bool, user: str, host: str,
                           op: AclOperation, rt: ResourceType, name: str) -> None:
    authorizer = StandardAuthorizer(None, allow_everyone_if_no_acl_found=default)
    authorizer.create(acls)
    unique = list(dict.fromkeys(acls))
    got = authorizer.authorize(KafkaPrincipal("User", user), host, op, rt, name)
    assert got == reference(unique, default, f"User:{user}", host, op, rt, name)
