"""tidelog.client.aio (the broker's own connections) over every listener kind: TLS, mutual
TLS, SASL PLAIN and SCRAM with and without TLS, configured from Kafka's property names; a
wrong password is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from security_support import MECHANISMS, PLAIN_USERS, SCRAM_PASSWORD, Pki, broker_props

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError
from tidelog.client.security import ClientSecurity
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
        upserts = [
            UserScramCredentialUpsertion(u, ScramCredentialInfo(m, 4096), SCRAM_PASSWORD.encode())
            for u, m in (
                ("scram256", ScramMechanism.SCRAM_SHA_256),
                ("scram512", ScramMechanism.SCRAM_SHA_512),
            )
        ]
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(10)
        yield b


def security_for(
    pki: Pki, protocol: str, mechanism: str | None, password: str | None = None
) -> ClientSecurity:
    props = {"security.protocol": "SSL" if protocol == "MTLS" else protocol}
    if "SSL" in props["security.protocol"]:
        props["ssl.truststore.location"] = pki.ca_file
    if protocol == "MTLS":
        props["ssl.certificate.location"] = pki.client_cert
        props["ssl.key.location"] = pki.client_key
    if mechanism == "PLAIN":
        props.update(
            {
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": password or PLAIN_USERS["alice"],
            }
        )
    elif mechanism:
        user = "scram256" if mechanism.endswith("256") else "scram512"
        props.update(
            {
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password or SCRAM_PASSWORD,
            }
        )
    return ClientSecurity.from_properties(props)


CASES = [("SSL", None), ("MTLS", None)] + [
    (p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS
]


@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
def test_requests_over_secured_listeners(
    broker: EmbeddedBroker, pki: Pki, protocol: str, mechanism: str | None
) -> None:
    port = broker.broker.bound_ports[protocol]

    async def main() -> None:
        conn = await AsyncBrokerConnection.connect(
            "127.0.0.1", port, client_id="t", security=security_for(pki, protocol, mechanism)
        )
        try:
            answers = await asyncio.gather(*(conn.request(3, {"topics": []}) for _ in range(5)))
        finally:
            await conn.close()
        assert conn.version(3) == 12
        assert all(len(a.brokers) == 1 for a in answers)

    asyncio.run(main())


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password(broker: EmbeddedBroker, pki: Pki, mechanism: str) -> None:
    port = broker.broker.bound_ports["SASL_SSL"]
    security = security_for(pki, "SASL_SSL", mechanism, password="wrong")

    async def main() -> None:
        with pytest.raises(KafkaClientError) as info:
            await AsyncBrokerConnection.connect("127.0.0.1", port, client_id="t", security=security)
        assert info.value.error == ErrorCode.sasl_authentication_failed

    asyncio.run(main())
