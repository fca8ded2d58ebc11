"""Authorization of the transaction APIs in Kafka's order (KafkaApis): WRITE on the
transactional id, then the topics (WRITE) or the group (READ); DESCRIBE on the id for
FindCoordinator and DescribeTransactions; ListTransactions lists only describable ids."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from acl_wire_support import As, acl_broker_props

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.security.authorizer import AclPermissionType, PatternType
from tidelog.server.security.types import AclOperation, ResourceType

Op, R, P, A = AclOperation, ResourceType, PatternType, AclPermissionType
ACLS = [
    (R.TRANSACTIONAL_ID, "alice-", P.PREFIXED, "User:alice", Op.WRITE, A.ALLOW),
    (R.TRANSACTIONAL_ID, "alice-", P.PREFIXED, "User:alice", Op.DESCRIBE, A.ALLOW),
    (R.TOPIC, "orders", P.LITERAL, "User:alice", Op.WRITE, A.ALLOW),
    (R.GROUP, "alice-g", P.LITERAL, "User:alice", Op.READ, A.ALLOW),
]


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    from tidelog.testing import EmbeddedBroker

    with EmbeddedBroker(acl_broker_props(**{"transaction.state.log.num.partitions": 2})) as b:
        with As(b, "admin") as admin:
            ccls = nested(request_class(30, 3), "creations")
            resp = admin.call(30, 3, creations=tuple(
                make(ccls, resource_type=rt, resource_name=n, resource_pattern_type=pt,
                     principal=who, host="*", operation=op, permission_type=perm)
                for rt, n, pt, who, op, perm in ACLS))
            assert [r.error_code for r in resp.results] == [0] * len(ACLS)
        for topic in ("orders", "secret"):
            b.broker.replica_manager.create_topic(topic, 1, {})
        yield b


def _init(c: As, tid: str) -> Any:
    deadline = time.monotonic() + 30
    while True:
        resp = c.call(22, 4, transactional_id=tid,
                      transaction_timeout=datetime.timedelta(seconds=60),
                      producer_id=-1, producer_epoch=-1)
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return resp
        assert time.monotonic() < deadline


def _add(c: As, tid: str, pid: int, epoch: int, *topics: str) -> dict[str, int]:
    tcls = nested(request_class(24, 3), "v3_and_below_topics")
    resp = c.call(24, 3, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                  v3_and_below_producer_epoch=epoch,
                  v3_and_below_topics=tuple(make(tcls, name=t, partitions=(0,)) for t in topics))
    return {t.name: int(t.results_by_partition[0].partition_error_code)
            for t in resp.results_by_topic_v3_and_below}


def test_transaction_apis_are_authorized(broker: Any) -> None:
    denied_id = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with As(broker, "bob") as bob:
        assert bob.call(10, 3, key="alice-tx", key_type=1).error_code == denied_id
        assert _init(bob, "alice-tx").error_code == denied_id
        desc = bob.call(65, 0, transactional_ids=("alice-tx",))
        assert desc.transaction_states[0].error_code == denied_id
    with As(broker, "alice") as alice:
        assert alice.call(10, 3, key="alice-tx", key_type=1).error_code == 0
        assert _init(alice, "other-tx").error_code == denied_id
        init = _init(alice, "alice-tx")
        assert init.error_code == 0
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        assert _add(alice, "alice-tx", pid, epoch, "orders", "secret") == {
            "orders": ErrorCode.OPERATION_NOT_ATTEMPTED,
            "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert _add(alice, "alice-tx", pid, epoch, "orders") == {"orders": 0}
        offsets = alice.call(25, 3, transactional_id="alice-tx", producer_id=pid,
                             producer_epoch=epoch, group_id="bob-g")
        assert offsets.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alice.call(26, 3, transactional_id="alice-tx", producer_id=pid,
                          producer_epoch=epoch, committed=False).error_code == 0
    with As(broker, "bob") as bob:
        listed = bob.call(66, 0, state_filters=(), producer_id_filters=())
        assert "alice-tx" not in [t.transactional_id for t in listed.transaction_states]
    with As(broker, "admin") as admin:
        listed = admin.call(66, 0, state_filters=(), producer_id_filters=())
        assert "alice-tx" in [t.transactional_id for t in listed.transaction_states]
