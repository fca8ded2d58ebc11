"""The ACL matrix per API on the wire: allowed, denied, deny-overrides-allow, prefixed
patterns, super user, and an unauthorized principal that cannot tell a missing topic from a
forbidden one. ACLs are created through CreateAcls by the super user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from acl_wire_support import As, acl_broker_props

from tidelog.protocol.errors import ErrorCode
from tidelog.server.security.authorizer import AclPermissionType, PatternType
from tidelog.server.security.types import AclOperation, ResourceType

OK = ErrorCode.NONE
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
Op, R, P, A = AclOperation, ResourceType, PatternType, AclPermissionType

ACLS = [
    # (resource type, name, pattern, principal, operation, permission)
    (R.TOPIC, "orders", P.LITERAL, "User:alice", Op.WRITE, A.ALLOW),
    (R.TOPIC, "orders", P.LITERAL, "User:alice", Op.READ, A.ALLOW),
    (R.TOPIC, "logs-", P.PREFIXED, "User:alice", Op.ALL, A.ALLOW),
    (R.TOPIC, "logs-secret", P.LITERAL, "User:alice", Op.ALL, A.DENY),
    (R.TOPIC, "public", P.LITERAL, "User:*", Op.DESCRIBE, A.ALLOW),
    (R.TOPIC, "carol-", P.PREFIXED, "User:carol", Op.READ, A.ALLOW),
    (R.GROUP, "alice-", P.PREFIXED, "User:alice", Op.READ, A.ALLOW),
]


@pytest.fixture(scope="module")
def broker() -> Iterator[object]:
    from tidelog.testing import EmbeddedBroker

    with EmbeddedBroker(acl_broker_props()) as b:
        with As(b, "admin") as admin:
            from tidelog.protocol.codec import request_class
            from tidelog.protocol.kio_util import make, nested

            ccls = nested(request_class(30, 3), "creations")
            creations = tuple(
                make(ccls, resource_type=rt, resource_name=name, resource_pattern_type=pt,
                     principal=who, host="*", operation=op, permission_type=perm)
                for rt, name, pt, who, op, perm in ACLS
            )
            resp = admin.call(30, 3, creations=creations)
            assert [r.error_code for r in resp.results] == [0] * len(ACLS)
            # topics created by the super user (auto-creation through Metadata)
            for topic in ("orders", "logs-app", "logs-secret", "public", "carol-data"):
                assert admin.metadata([topic], auto_create=True)[topic] == OK
        yield b


@pytest.mark.parametrize(
    ("user", "topic", "produce", "fetch", "list_offsets"),
    [
        ("alice", "orders", OK, OK, OK),  # literal ALLOW WRITE/READ (DESCRIBE implied)
        ("alice", "logs-app", OK, OK, OK),  # prefixed ALLOW ALL
        ("alice", "logs-secret", DENIED, DENIED, DENIED),  # DENY ALL beats the prefixed ALLOW
        ("alice", "public", DENIED, DENIED, OK),  # everyone may DESCRIBE only
        ("bob", "orders", DENIED, DENIED, DENIED),  # no ACL for bob
        ("carol", "carol-data", DENIED, OK, OK),  # prefixed READ: fetch yes, produce no
        ("admin", "orders", OK, OK, OK),  # super user
        ("admin", "public", OK, OK, OK),
    ],
)
def test_per_api(broker: object, user: str, topic: str, produce: int, fetch: int,
                 list_offsets: int) -> None:
    with As(broker, user) as c:  # type: ignore[arg-type]
        assert c.produce(topic) == produce
        assert c.fetch(topic) == fetch
        assert c.list_offsets(topic) == list_offsets
        described = list_offsets == OK
        assert c.metadata([topic]) == {topic: OK if described else DENIED}


@pytest.mark.parametrize("user", ["bob", "alice"])
def test_missing_and_forbidden_topics_look_the_same(broker: object, user: str) -> None:
    with As(broker, user) as c:  # type: ignore[arg-type]
        forbidden, missing = ("orders", "no-such-topic") if user == "bob" else (
            "logs-secret", "logs-secret-missing-but-denied")
        if user == "alice":  # alice's DENY is literal: use a name her prefix ALLOW misses
            missing = "nothing-here"
        for api in (c.produce, c.fetch, c.list_offsets):
            assert api(forbidden) == api(missing) == DENIED
        assert c.metadata([forbidden, missing], auto_create=True) == {
            forbidden: DENIED, missing: DENIED}


def test_metadata_all_topics_lists_only_described(broker: object) -> None:
    with As(broker, "alice") as c:  # type: ignore[arg-type]
        assert set(c.metadata(None)) == {"orders", "logs-app", "public"}
    with As(broker, "bob") as c:  # type: ignore[arg-type]
        assert set(c.metadata(None)) == {"public"}
    with As(broker, "admin") as c:  # type: ignore[arg-type]
        assert {"orders", "logs-secret", "carol-data"} <= set(c.metadata(None))


def test_auto_create_needs_create(broker: object) -> None:
    with As(broker, "alice") as c:  # type: ignore[arg-type]
        # DESCRIBE (prefixed ALL) but CREATE is covered too: ALL includes it
        assert c.metadata(["logs-new"], auto_create=True) == {"logs-new": OK}
        assert c.produce("logs-new") == OK
    with As(broker, "carol") as c:  # type: ignore[arg-type]
        # READ implies DESCRIBE, not CREATE: TOPIC_AUTHORIZATION_FAILED, nothing created
        assert c.metadata(["carol-new"], auto_create=True) == {"carol-new": DENIED}
    with As(broker, "admin") as c:  # type: ignore[arg-type]
        assert "carol-new" not in c.metadata(None)


def test_transactional_id_checked_first(broker: object) -> None:
    with As(broker, "alice") as c:  # type: ignore[arg-type]
        assert c.produce("orders", transactional_id="tx-1") == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


@pytest.mark.parametrize(("user", "group", "allowed"),
                         [("alice", "alice-g", True), ("bob", "alice-g", False),
                          ("alice", "other", False), ("admin", "other", True)])
def test_group_apis(broker: object, user: str, group: str, allowed: bool) -> None:
    with As(broker, user) as c:  # type: ignore[arg-type]
        coord = c.call(10, 3, key=group, key_type=0)
        assert (coord.error_code == 0) == allowed
        assert allowed or coord.error_code == GROUP_DENIED
        hb = c.call(12, 4, group_id=group, generation_id=1, member_id="m",
                    group_instance_id=None)
        # allowed: the group's own answer (no such member); denied: before any lookup
        assert hb.error_code == (ErrorCode.UNKNOWN_MEMBER_ID if allowed else GROUP_DENIED)
        described = c.call(15, 5, groups=(group,), include_authorized_operations=False)
        assert (described.groups[0].error_code == GROUP_DENIED) != allowed
        fetched = c.call(9, 7, group_id=group, topics=None, require_stable=False)
        assert (fetched.error_code == GROUP_DENIED) != allowed


def test_offset_commit_checks_topic_after_group(broker: object) -> None:
    from tidelog.protocol.codec import request_class
    from tidelog.protocol.kio_util import make, nested

    tcls = nested(request_class(8, 8), "topics")
    pcls = nested(tcls, "partitions")

    def commit(c: As, group: str, topic: str) -> int:
        resp = c.call(8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, topics=(make(tcls, name=topic, partitions=(
                          make(pcls, partition_index=0, committed_offset=0,
                               committed_leader_epoch=-1, committed_metadata=""),)),))
        return int(resp.topics[0].partitions[0].error_code)

    with As(broker, "alice") as c:  # type: ignore[arg-type]
        assert commit(c, "alice-g", "orders") == OK
        assert commit(c, "alice-g", "logs-secret") == DENIED  # group ok, topic denied
        assert commit(c, "alice-g", "no-such-topic") == DENIED  # not UNKNOWN_TOPIC
        assert commit(c, "other", "orders") == GROUP_DENIED
    with As(broker, "bob") as c:  # type: ignore[arg-type]
        listed = c.call(16, 4, states_filter=())
        assert [g.group_id for g in listed.groups] == []  # alice-g exists, bob sees none
    with As(broker, "admin") as c:  # type: ignore[arg-type]
        listed = c.call(16, 4, states_filter=())
        assert "alice-g" in [g.group_id for g in listed.groups]


CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _create_topic(c: As, name: str) -> int:
    from tidelog.protocol.codec import request_class
    from tidelog.protocol.kio_util import make, nested

    tcls = nested(request_class(19, 7), "topics")
    resp = c.call(19, 7, timeout=5000, validate_only=True, topics=(make(
        tcls, name=name, num_partitions=1, replication_factor=1, assignments=(),
        configs=()),))
    return int(resp.topics[0].error_code)


def _describe_configs(c: As, resource_type: int, name: str) -> int:
    from tidelog.protocol.codec import request_class
    from tidelog.protocol.kio_util import make, nested

    rcls = nested(request_class(32, 4), "resources")
    resp = c.call(32, 4, include_synonyms=False, include_documentation=False,
                  resources=(make(rcls, resource_type=resource_type, resource_name=name,
                                  configuration_keys=None),))
    return int(resp.results[0].error_code)


@pytest.mark.parametrize(
    ("user", "topic", "create", "delete", "topic_configs", "cluster_ok"),
    [
        # prefixed ALL: CREATE, and DESCRIBE_CONFIGS reaches the existence check
        ("alice", "logs-new2", OK, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
        ("alice", "orders", None, DENIED, DENIED, False),  # WRITE/READ only
        ("bob", "orders", DENIED, DENIED, DENIED, False),
        ("bob", "absent-topic", DENIED, DENIED, DENIED, False),  # same as forbidden
        ("admin", "admin-new", OK, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True),
        ("admin", "orders", None, None, OK, True),
    ],
)
def test_admin_apis(broker: object, user: str, topic: str, create: int | None,
                    delete: int | None, topic_configs: int, cluster_ok: bool) -> None:
    with As(broker, user) as c:  # type: ignore[arg-type]
        if create is not None:
            assert _create_topic(c, topic) == create  # validate_only: nothing is created
        if delete is not None:
            resp = c.call(20, 6, timeout_ms=5000, topics=(
                _delete_topic_state(topic),))
            assert resp.responses[0].error_code == delete
        assert _describe_configs(c, 2, topic) == topic_configs
        assert (_describe_configs(c, 4, "1") == OK) == cluster_ok
        dirs = c.call(35, 4, topics=None)
        assert (dirs.error_code == OK) == cluster_ok
        assert cluster_ok or dirs.error_code == CLUSTER_DENIED


def _delete_topic_state(name: str) -> object:
    from tidelog.protocol.codec import request_class
    from tidelog.protocol.kio_util import make, nested

    return make(nested(request_class(20, 6), "topics"), name=name, topic_id=None)


@pytest.mark.parametrize(("user", "code"), [("alice", OK), ("carol", CLUSTER_DENIED),
                                            ("admin", OK)])
def test_idempotent_producer_id(broker: object, user: str, code: int) -> None:
    """An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    (alice may WRITE orders; carol only READs)."""
    with As(broker, user) as c:  # type: ignore[arg-type]
        resp = c.call(22, 4, transactional_id=None, transaction_timeout=60000,
                      producer_id=-1, producer_epoch=-1)
        assert resp.error_code == code


def test_acl_apis_need_cluster_rights(broker: object) -> None:
    with As(broker, "alice") as c:  # type: ignore[arg-type]
        resp = c.call(29, 3, resource_type_filter=1, resource_name_filter=None,
                      pattern_type_filter=1, principal_filter=None, host_filter=None,
                      operation=1, permission_type=1)
        assert resp.error_code == CLUSTER_DENIED and resp.resources == ()
        scram = c.call(50, 0, users=None)
        assert scram.error_code == CLUSTER_DENIED
    with As(broker, "admin") as c:  # type: ignore[arg-type]
        resp = c.call(29, 3, resource_type_filter=2, resource_name_filter="logs-app",
                      pattern_type_filter=2, principal_filter=None, host_filter=None,
                      operation=1, permission_type=1)  # MATCH: what applies to logs-app
        assert resp.error_code == OK
        assert {(r.resource_name, r.pattern_type) for r in resp.resources} == {
            ("logs-", int(P.PREFIXED))}
