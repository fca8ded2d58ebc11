"""Authenticated produce/consume with real clients over every listener kind:
{SSL, mutual TLS, SASL_PLAINTEXT, SASL_SSL} x {PLAIN, SCRAM-SHA-256, SCRAM-SHA-512} x
{confluent-kafka, kafka-python, aiokafka, kcat}; wrong passwords fail with
SASL_AUTHENTICATION_FAILED; a plaintext client on a TLS port and a TLS client on a plaintext
port are refused without harm. One broker serves every listener (module scope)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import aiokafka
import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from security_support import (
    MECHANISMS,
    PLAIN_USERS,
    SCRAM_PASSWORD,
    Pki,
    aiokafka_conf,
    broker_props,
    kafka_python_conf,
    librdkafka_conf,
    listener_of,
)

from tidelog.testing import EmbeddedBroker

CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
RECORDS = [b"alpha", b"beta", b"gamma"]


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    pki = Pki.create()
    yield pki
    pki.remove()


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(broker_props(pki)) as b:
        admin = AdminClient({"bootstrap.servers": bootstrap(b, "PLAINTEXT")})
        upserts = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096),
                                        SCRAM_PASSWORD.encode())
            for user, mech in (("scram256", ScramMechanism.SCRAM_SHA_256),
                               ("scram512", ScramMechanism.SCRAM_SHA_512))
        ]
        for fut in admin.alter_user_scram_credentials(upserts).values():
            fut.result(10)
        yield b


def bootstrap(b: EmbeddedBroker, listener: str) -> str:
    return f"127.0.0.1:{b.broker.bound_ports[listener]}"


def user_for(mechanism: str | None) -> tuple[str | None, str | None]:
    if mechanism is None:
        return None, None
    if mechanism == "PLAIN":
        return "alice", PLAIN_USERS["alice"]
    return ("scram256" if mechanism.endswith("256") else "scram512"), SCRAM_PASSWORD


CASES = [("SSL", None), ("MTLS", None)] + [
    (p, m) for p in ("SASL_PLAINTEXT", "SASL_SSL") for m in MECHANISMS
]


# -- one produce + consume round per client -------------------------------------------------
def _confluent(bs: str, conf: dict[str, str], topic: str) -> list[bytes]:
    p = confluent_kafka.Producer({"bootstrap.servers": bs, **conf})
    errors: list[Any] = []
    for r in RECORDS:
        p.produce(topic, r, on_delivery=lambda e, m: errors.append(e))
    assert p.flush(20) == 0 and errors == [None] * len(RECORDS)
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "g", **conf,
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            if len(got) == len(RECORDS):
                break
    finally:
        c.close()
    return got


def _kafka_python(bs: str, conf: dict[str, Any], topic: str) -> list[bytes]:
    p = kafka.KafkaProducer(bootstrap_servers=bs, **conf)
    for r in RECORDS:
        p.send(topic, r).get(20)
    p.close()
    c = kafka.KafkaConsumer(bootstrap_servers=bs, **conf, enable_auto_commit=False)
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got: list[bytes] = []
    try:
        for _ in range(40):
            for batch in c.poll(500).values():
                got.extend(m.value for m in batch)
            if len(got) >= len(RECORDS):
                break
    finally:
        c.close()
    return got


def _aiokafka(bs: str, conf: dict[str, Any], topic: str) -> list[bytes]:
    async def run() -> list[bytes]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, **conf)
        await p.start()
        try:
            for r in RECORDS:
                await p.send_and_wait(topic, r)
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, **conf, enable_auto_commit=False)
        await c.start()
        got: list[bytes] = []
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            for _ in range(40):
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
                if len(got) >= len(RECORDS):
                    break
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def _kcat_args(bs: str, conf: dict[str, str]) -> list[str]:
    args = ["kcat", "-b", bs]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    return args


def _kcat(bs: str, conf: dict[str, str], topic: str) -> list[bytes]:
    base = _kcat_args(bs, conf)
    subprocess.run([*base, "-P", "-t", topic], input=b"\n".join(RECORDS) + b"\n",
                   check=True, timeout=60, capture_output=True)
    out = subprocess.run([*base, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         check=True, timeout=60, capture_output=True)
    return out.stdout.splitlines()


def _round(client: str, pki: Pki, bs: str, protocol: str, mech: str | None, user: str | None,
           password: str | None, topic: str) -> list[bytes]:
    if client == "confluent":
        return _confluent(bs, librdkafka_conf(pki, protocol, mech, user, password), topic)
    if client == "kcat":
        return _kcat(bs, librdkafka_conf(pki, protocol, mech, user, password), topic)
    if client == "kafka-python":
        return _kafka_python(bs, kafka_python_conf(pki, protocol, mech, user, password), topic)
    return _aiokafka(bs, aiokafka_conf(pki, protocol, mech, user, password), topic)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(("protocol", "mechanism"), CASES)
def test_authenticated_produce_consume(
    broker: EmbeddedBroker, pki: Pki, client: str, protocol: str, mechanism: str | None
) -> None:
    user, password = user_for(mechanism)
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    bs = bootstrap(broker, listener_of(protocol))
    got = _round(client, pki, bs, protocol, mechanism, user, password, topic)
    assert got == RECORDS


# -- wrong passwords ------------------------------------------------------------------------
def _wrong_password_error(client: str, pki: Pki, bs: str, protocol: str, mech: str,
                          user: str) -> str:
    """The error the client reports for a rejected password (as text)."""
    if client in ("confluent", "kcat"):
        conf = librdkafka_conf(pki, protocol, mech, user, "wrong-password")
        if client == "kcat":
            r = subprocess.run([*_kcat_args(bs, conf), "-L", "-m", "2"], capture_output=True,
                               timeout=60)
            assert r.returncode != 0
            return r.stderr.decode()
        errors: list[confluent_kafka.KafkaError] = []
        p = confluent_kafka.Producer({"bootstrap.servers": bs, **conf,
                                      "error_cb": errors.append})
        for _ in range(100):
            p.poll(0.1)
            if any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors):
                break
        p.flush(0)
        return " ".join(str(e) for e in errors)
    if client == "kafka-python":
        conf = kafka_python_conf(pki, protocol, mech, user, "wrong-password")
        with pytest.raises(Exception) as info:
            kafka.KafkaProducer(bootstrap_servers=bs, **conf, bootstrap_timeout_ms=4000)
        return f"{type(info.value).__name__} {info.value}"

    async def run() -> str:
        conf = aiokafka_conf(pki, protocol, mech, user, "wrong-password")
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs, **conf)
        try:
            await p.start()
        except Exception as exc:
            return f"{type(exc).__name__} {exc} {exc.__cause__!r}"
        finally:
            await p.stop()
        raise AssertionError("aiokafka started with a wrong password")

    return asyncio.run(run())


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password(broker: EmbeddedBroker, pki: Pki, client: str, mechanism: str,
                        caplog: pytest.LogCaptureFixture) -> None:
    user, _ = user_for(mechanism)
    assert user is not None
    text = _wrong_password_error(client, pki, bootstrap(broker, "SASL_SSL"), "SASL_SSL",
                                 mechanism, user)
    # kafka-python retries until bootstrap_timeout_ms (4 s: a loaded machine must fit one
    # whole TLS + SASL attempt in it); both log the wire error and raise a bootstrap one
    if client in ("kafka-python", "aiokafka"):
        assert "[Error 58] SaslAuthenticationFailed" in caplog.text
        assert "Unable to bootstrap" in text
        return
    # the broker's SASL_AUTHENTICATION_FAILED message, as each client surfaces it
    assert "Authentication failed" in text or "SaslAuthenticationFailed" in text, text


# -- the wrong transport --------------------------------------------------------------------
def _broker_still_serves(b: EmbeddedBroker, pki: Pki) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap(b, "SSL"),
                                  **librdkafka_conf(pki, "SSL", None, None, None)})
    assert p.list_topics(timeout=10).brokers


def test_plaintext_client_on_a_tls_port(broker: EmbeddedBroker, pki: Pki) -> None:
    api_versions = bytes.fromhex("0000000d0012000000000001000374657374")
    for listener in ("SSL", "SASL_SSL", "MTLS"):
        with socket.create_connection(("127.0.0.1", broker.broker.bound_ports[listener]),
                                      timeout=10) as s:
            s.sendall(api_versions)
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except ConnectionResetError:
                pass
            # never a Kafka response: at most a TLS alert record, then the close
            assert not data or data[:1] == b"\x15", data[:16]
    _broker_still_serves(broker, pki)


def test_tls_client_on_a_plaintext_port(broker: EmbeddedBroker, pki: Pki) -> None:
    ctx = ssl.create_default_context(cafile=pki.ca_file)
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
        raw = socket.create_connection(("127.0.0.1", broker.broker.bound_ports[listener]),
                                       timeout=10)
        with (pytest.raises((ssl.SSLError, ConnectionError, OSError)),
              ctx.wrap_socket(raw, server_hostname="127.0.0.1")):
            pass
        raw.close()
    _broker_still_serves(broker, pki)
    # and an mTLS listener refuses a TLS client without a certificate
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        raw = socket.create_connection(("127.0.0.1", broker.broker.bound_ports["MTLS"]),
                                       timeout=10)
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"\x00\x00\x00\x00")
            assert s.recv(1) == b""
            raise ConnectionError("closed")


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_large_fetch_over_tls(broker: EmbeddedBroker, pki: Pki, listener: str) -> None:
    """Fetch answers of 32 KiB and more leave plaintext listeners by sendfile; over TLS they
    must go through the TLS stream (a regression: raw file bytes broke the TLS record)."""
    mech, (user, password) = (None, (None, None)) if listener == "SSL" else (
        "SCRAM-SHA-256", user_for("SCRAM-SHA-256"))
    conf = librdkafka_conf(pki, listener, mech, user, password)
    bs = bootstrap(broker, listener)
    topic = f"big-{uuid.uuid4().hex[:8]}"
    value = bytes(range(256)) * 512  # 128 KiB, incompressible enough not to matter
    p = confluent_kafka.Producer({"bootstrap.servers": bs, **conf,
                                  "message.max.bytes": 1_000_000})
    for _ in range(8):
        p.produce(topic, value)
    assert p.flush(20) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "big", **conf})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) == 8:
                break
    finally:
        c.close()
    assert got == [value] * 8
