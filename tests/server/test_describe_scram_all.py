"""DescribeUserScramCredentials with no user list describes every user that has a credential,
as Kafka's ZkAdminManager does (confluent-kafka's ``describe_user_scram_credentials()``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_wire import Wire
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import nested
from tidelog.testing import EmbeddedBroker

API_KEY = 50


@pytest.fixture
def admin_and_broker() -> Iterator[tuple[AdminClient, EmbeddedBroker]]:
    with EmbeddedBroker() as b:
        yield AdminClient({"bootstrap.servers": b.bootstrap_servers}), b


def _upsert(admin: AdminClient, user: str, mech: ScramMechanism, iterations: int) -> None:
    info = ScramCredentialInfo(mech, iterations)
    fut = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"pw")])
    assert fut[user].result(10) is None


def test_describe_all_lists_every_user_with_credentials(
    admin_and_broker: tuple[AdminClient, EmbeddedBroker],
) -> None:
    admin, broker = admin_and_broker
    assert admin.describe_user_scram_credentials().result(10) == {}
    _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_512, 8192)
    _upsert(admin, "alice", ScramMechanism.SCRAM_SHA_256, 4096)
    _upsert(admin, "alice", ScramMechanism.SCRAM_SHA_512, 5000)
    _upsert(admin, "bob", ScramMechanism.SCRAM_SHA_256, 4096)
    deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)
    assert admin.alter_user_scram_credentials([deletion])["bob"].result(10) is None

    described = admin.describe_user_scram_credentials().result(10)
    got = {
        user: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        for user, d in described.items()
    }
    assert got == {  # bob lost his only credential: he is no longer a user with credentials
        "alice": [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 5000)],
        "carol": [(ScramMechanism.SCRAM_SHA_512, 8192)],
    }

    # on the wire: null and an empty list both mean all users, sorted by name
    with Wire(broker) as wire:
        for users in (None, ()):
            resp = wire.call(API_KEY, 0, users=users)
            assert [r.user for r in resp.results] == ["alice", "carol"]  # type: ignore[attr-defined]
            assert {r.error_code for r in resp.results} == {ErrorCode.NONE}  # type: ignore[attr-defined]


def test_named_users_answer_as_kafka_does(
    admin_and_broker: tuple[AdminClient, EmbeddedBroker],
) -> None:
    admin, broker = admin_and_broker
    _upsert(admin, "alice", ScramMechanism.SCRAM_SHA_256, 4096)
    ucls = nested(request_class(API_KEY, 0), "users")
    asked = tuple(ucls(name=n) for n in ("alice", "ghost", "", "twice", "twice"))
    with Wire(broker) as wire:
        resp = wire.call(API_KEY, 0, users=asked)
    got = [(r.user, r.error_code, r.error_message) for r in resp.results]  # type: ignore[attr-defined]
    assert got == [
        ("alice", ErrorCode.NONE, None),
        ("ghost", ErrorCode.RESOURCE_NOT_FOUND,
         "Attempt to describe a user credential that does not exist: ghost"),
        ("", ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"),
        ("twice", ErrorCode.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request"),
    ]  # fmt: skip
