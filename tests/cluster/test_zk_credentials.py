"""SCRAM users in ZooKeeper (/config/users) as Kafka keeps them: created through one broker,
they authenticate on another."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ScramMechanism as ConfluentScramMechanism

from tidelog.protocol.scram import ScramCredential, ScramMechanism
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.credentials import ZkCredentialStore, credential_from_string
from tidelog.testing import EmbeddedBroker


def _wait(cond: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 15
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_credentials_written_on_one_store_reach_another(zookeeper_connect: str) -> None:
    zks = [KafkaZkClient(zookeeper_connect) for _ in range(2)]
    for zk in zks:
        zk.start()
    try:
        zks[0].set_or_create_entity_configs("users", "bob", {"producer_byte_rate": "1024"})
        one, two = (ZkCredentialStore(zk) for zk in zks)
        one.load()
        two.load()
        cred = ScramCredential(b"salt", b"stored", b"server", 4096)
        one.apply([("bob", ScramMechanism.SCRAM_SHA_256, cred)], [])
        js = json.loads(zks[0].zk.get("/config/users/bob")[0])
        assert js == {"version": 1, "config": {
            "producer_byte_rate": "1024",  # the user's quota stays
            "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"}}  # fmt: skip
        assert credential_from_string(js["config"]["SCRAM-SHA-256"]) == cred
        _wait(lambda: two.get("bob", ScramMechanism.SCRAM_SHA_256) == cred, "store two sees bob")
        two.apply([], [("bob", ScramMechanism.SCRAM_SHA_256)])
        _wait(lambda: one.get("bob", ScramMechanism.SCRAM_SHA_256) is None, "store one drops bob")
        assert json.loads(zks[0].zk.get("/config/users/bob")[0])["config"] == {"producer_byte_rate": "1024"}
    finally:
        for zk in zks:
            zk.close()


def test_a_scram_user_created_through_one_broker_authenticates_on_another(zookeeper_connect: str) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-pw" user_admin="admin-pw";')  # fmt: skip
    props = {
        "zookeeper.connect": zookeeper_connect, "controlled.shutdown.retry.backoff.ms": "100",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }  # fmt: skip
    brokers = [EmbeddedBroker({**props, "broker.id": str(b)}).start() for b in (1, 2)]
    sasl = {"security.protocol": "SASL_PLAINTEXT"}
    try:
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap_servers, **sasl,
                             "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"})  # fmt: skip

        def bob_on_broker_two() -> AdminClient:
            return AdminClient({"bootstrap.servers": brokers[1].bootstrap_servers, **sasl,
                                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob",
                                "sasl.password": "bob-pw"})  # fmt: skip

        with pytest.raises(KafkaException):
            bob_on_broker_two().list_topics(timeout=3)  # no such user yet
        upsert = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ConfluentScramMechanism.SCRAM_SHA_256, 4096), b"bob-pw")
        admin.alter_user_scram_credentials([upsert])["bob"].result(30)  # through broker 1
        _wait(lambda: brokers[1].broker.credentials.get("bob", ScramMechanism.SCRAM_SHA_256) is not None,
              "broker 2 knows bob")  # fmt: skip
        md = bob_on_broker_two().list_topics(timeout=10)
        assert 2 in md.brokers
    finally:
        for b in brokers:
            b.stop()
