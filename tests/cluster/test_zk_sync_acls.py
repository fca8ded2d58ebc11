"""ACL writes from several brokers at once on one resource: each broker's change is applied
to what ZooKeeper holds at the time (a conditional write, retried on a version conflict), so
none is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tidelog.server.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
)
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.server.zk.acls import ZkAclAuthorizer
from tidelog.server.zk.client import KafkaZkClient

PER_BROKER = 25


def _wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 15
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _read(user: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, "shared", PatternType.LITERAL, f"User:{user}", "*",
                      AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip


def _at_once(work: list[Callable[[], None]]) -> None:
    barrier = threading.Barrier(len(work))
    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        barrier.wait()
        try:
            fn()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_acls_created_on_one_resource_by_two_brokers_at_once_all_land(zookeeper_connect: str) -> None:
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(3)]
    for zk in zks:
        zk.start()
    try:
        brokers = [ZkAclAuthorizer(zk) for zk in zks[:2]]
        for b in brokers:
            b.load()
        wanted = {i: [_read(f"b{i}-{n}") for n in range(PER_BROKER)] for i in range(2)}

        def creating(i: int) -> Callable[[], None]:
            def work() -> None:
                for acl in wanted[i]:  # one CreateAcls per ACL: many conflicting writes
                    brokers[i].create([acl])
            return work

        _at_once([creating(0), creating(1)])
        stored, _ = zks[2].get_versioned_acls("/kafka-acl/Topic/shared")
        everyone = sorted(a.principal for acls in wanted.values() for a in acls)
        assert sorted(e.principal for e in stored) == everyone
        for b in brokers:  # and each broker's cache converges on ZooKeeper's
            _wait(lambda b=b: sorted(a.principal for a in b.acls()) == everyone, "caches agree")

        def deleting(i: int) -> Callable[[], None]:
            def work() -> None:
                for acl in wanted[i]:
                    brokers[i].delete([AclBindingFilter(principal=acl.principal)])
            return work

        _at_once([deleting(0), deleting(1)])
        assert zks[2].zk.exists("/kafka-acl/Topic/shared") is None  # emptied: the znode goes
        for b in brokers:
            _wait(lambda b=b: b.acls() == [], "caches empty")
    finally:
        for zk in zks:
            zk.close()


def test_delete_reports_what_it_removed_from_zookeeper(zookeeper_connect: str) -> None:
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(2)]
    for zk in zks:
        zk.start()
    try:
        one, two = (ZkAclAuthorizer(zk) for zk in zks)
        one.load()
        two.load()
        one.create([_read("alice"), _read("bob")])
        _wait(lambda: len(two.acls()) == 2, "broker two sees both")
        removed = two.delete([AclBindingFilter(principal="User:alice"),
                              AclBindingFilter(principal="User:carol")])  # fmt: skip
        assert removed == [[_read("alice")], []]
        entries, _ = zks[0].get_versioned_acls("/kafka-acl/Topic/shared")
        assert [e.principal for e in entries] == ["User:bob"]
        _wait(lambda: one.acls() == [_read("bob")], "broker one drops alice")
    finally:
        for zk in zks:
            zk.close()
