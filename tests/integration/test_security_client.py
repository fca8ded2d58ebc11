"""The hand-written client (tidelog.client.kafka_client, used by the Spark source and the CLI's
raw paths) over every listener kind, configured from Kafka's client property names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from security_support import MECHANISMS, PLAIN_USERS, SCRAM_PASSWORD, Pki, broker_props

from tidelog.client.kafka_client import KafkaClient, KafkaClientError, TopicPartition
from tidelog.client.security import ClientSecurity
from tidelog.records.builder import build_batch
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    pki = Pki.create()
    yield pki
    pki.remove()


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(broker_props(pki)) as b:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.broker.bound_ports['PLAINTEXT']}"})
        upserts = [UserScramCredentialUpsertion(u, ScramCredentialInfo(m, 4096),
                                                SCRAM_PASSWORD.encode())
                   for u, m in (("scram256", ScramMechanism.SCRAM_SHA_256),
                                ("scram512", ScramMechanism.SCRAM_SHA_512))]
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(10)
        yield b


def properties(pki: Pki, protocol: str, mechanism: str | None,
               password: str | None = None) -> dict[str, str]:
    props = {"security.protocol": "SSL" if protocol == "MTLS" else protocol}
    if "SSL" in props["security.protocol"]:
        props["ssl.truststore.location"] = pki.ca_file  # Java's name, PEM
    if protocol == "MTLS":
        props["ssl.certificate.location"] = pki.client_cert
        props["ssl.key.location"] = pki.client_key
    if mechanism == "PLAIN":
        pw = password or PLAIN_USERS["alice"]
        props["sasl.mechanism"] = "PLAIN"
        props["sasl.jaas.config"] = ("org.apache.kafka.common.security.plain.PlainLoginModule "
                                     f'required username="alice" password="{pw}";')
    elif mechanism:
        props.update({"sasl.mechanism": mechanism, "sasl.password": password or SCRAM_PASSWORD,
                      "sasl.username": "scram256" if mechanism.endswith("256") else "scram512"})
    return props


CASES = [("SSL", None), ("MTLS", None)] + [
    (p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
def test_produce_fetch(broker: EmbeddedBroker, pki: Pki, protocol: str,
                       mechanism: str | None) -> None:
    security = ClientSecurity.from_properties(properties(pki, protocol, mechanism))
    port = broker.broker.bound_ports[protocol]
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    with KafkaClient(f"127.0.0.1:{port}", security=security) as c:
        c.create_topics({topic: 1})
        tp = TopicPartition(topic, 0)
        c.produce(c.leader_for(tp), {tp: build_batch([(0, b"k", b"secure")])})
        values = [rec.value for _, rec in c.iter_records(tp, 0, 1)]
    assert values == [b"secure"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password(broker: EmbeddedBroker, pki: Pki, mechanism: str) -> None:
    security = ClientSecurity.from_properties(
        properties(pki, "SASL_SSL", mechanism, password="wrong"))
    port = broker.broker.bound_ports["SASL_SSL"]
    with pytest.raises(KafkaClientError, match="SASL_AUTHENTICATION_FAILED"), KafkaClient(
        f"127.0.0.1:{port}", security=security, retries=0
    ) as c:
        c.list_topics()
