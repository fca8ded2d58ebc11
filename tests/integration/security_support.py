"""Shared pieces of the security tests: certificates generated per run (trustme), a broker
with every listener kind, and client settings for confluent-kafka, kafka-python, aiokafka
and kcat. Nothing here is checked-in key material."""

from __future__ import annotations

import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

ADMIN = ("admin", "admin-secret")
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_PASSWORD = "scram-secret-1"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="admin-secret" {entries};')


@dataclass
class Pki:
    dir: Path
    ca_file: str
    keystore: str  # broker key + chain, one PEM file (ssl.keystore.location)
    client_cert: str
    client_key: str

    @classmethod
    def create(cls) -> Pki:
        d = Path(tempfile.mkdtemp(prefix="tidelog-pki-"))
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("client1@example", common_name="client1",
                               organization_name="Tidelog Tests",
                               organization_unit_name="clients")
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        server.private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
        client.cert_chain_pems[0].write_to_path(str(d / "client.pem"))
        client.private_key_pem.write_to_path(str(d / "client.key"))
        return cls(d, str(d / "ca.pem"), str(d / "broker.pem"), str(d / "client.pem"),
                   str(d / "client.key"))

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def broker_props(pki: Pki, **extra: Any) -> dict[str, Any]:
    """Every listener kind on one broker: PLAINTEXT first (for the tests' own admin calls),
    SSL, mutual TLS (MTLS, ssl.client.auth=required), SASL_PLAINTEXT and SASL_SSL."""
    props: dict[str, Any] = {
        "listeners": ",".join(f"{n}://127.0.0.1:0" for n in
                              ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(PLAIN_USERS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(PLAIN_USERS),
        "connection.failed.authentication.delay.ms": 20,
        "auto.create.topics.enable": "true",
    }
    props.update(extra)
    return props


def listener_of(protocol: str) -> str:
    return "MTLS" if protocol == "MTLS" else protocol


def security_protocol(protocol: str) -> str:
    return "SSL" if protocol == "MTLS" else protocol


def librdkafka_conf(pki: Pki, protocol: str, mechanism: str | None, user: str | None,
                    password: str | None) -> dict[str, str]:
    conf = {"security.protocol": security_protocol(protocol)}
    if "SSL" in conf["security.protocol"]:
        conf["ssl.ca.location"] = pki.ca_file
    if protocol == "MTLS":
        conf["ssl.certificate.location"] = pki.client_cert
        conf["ssl.key.location"] = pki.client_key
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user or "",
                     "sasl.password": password or ""})
    return conf


def kafka_python_conf(pki: Pki, protocol: str, mechanism: str | None, user: str | None,
                      password: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security_protocol": security_protocol(protocol)}
    if "SSL" in conf["security_protocol"]:
        conf["ssl_cafile"] = pki.ca_file
    if protocol == "MTLS":
        conf.update(ssl_certfile=pki.client_cert, ssl_keyfile=pki.client_key)
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=password)
    return conf


def aiokafka_conf(pki: Pki, protocol: str, mechanism: str | None, user: str | None,
                  password: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security_protocol": security_protocol(protocol)}
    if "SSL" in conf["security_protocol"]:
        ctx = ssl.create_default_context(cafile=pki.ca_file)
        if protocol == "MTLS":
            ctx.load_cert_chain(pki.client_cert, pki.client_key)
        conf["ssl_context"] = ctx
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=password)
    return conf
