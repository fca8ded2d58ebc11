"""The SASL state machine on the wire: only ApiVersions/SaslHandshake/SaslAuthenticate before
authentication, the pre-auth frame cap, SASL_AUTHENTICATION_FAILED then close, unsupported
mechanisms, ILLEGAL_SASL_STATE after authentication or on a listener without SASL."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from sasl_wire_support import call, closed_by_peer, frame

from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedBroker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": JAAS,
        "sasl.server.max.receive.size": 4096,
        "connection.failed.authentication.delay.ms": 10,
    }
    with EmbeddedBroker(props) as b:
        yield b


def sasl_sock(b: EmbeddedBroker, listener: str = "SASL_PLAINTEXT") -> socket.socket:
    return socket.create_connection(("127.0.0.1", b.broker.bound_ports[listener]), timeout=10)


def test_plain_success_then_metadata(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        assert call(s, 18, 3, client_software_name="t", client_software_version="1").error_code == 0
        hs = call(s, 17, 1, mechanism="PLAIN")
        assert hs.error_code == 0 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256"}
        auth = call(s, 36, 2, auth_bytes=b"\x00alice\x00alice-secret")
        assert auth.error_code == 0
        assert call(s, 3, 12, topics=None).brokers[0].port == broker.broker.bound_ports[
            "SASL_PLAINTEXT"]
        # a second handshake after authentication: ILLEGAL_SASL_STATE (KafkaApis)
        assert call(s, 17, 1, mechanism="PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_wrong_password_is_answered_then_closed(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        call(s, 17, 1, mechanism="PLAIN")
        auth = call(s, 36, 2, auth_bytes=b"\x00alice\x00nope")
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Authentication failed" in auth.error_message
        assert closed_by_peer(s)


def test_other_api_before_authentication_closes(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        s.sendall(frame(3, 12, 1, topics=None))
        assert closed_by_peer(s)
    with sasl_sock(broker) as s:  # handshake done, but Metadata instead of SaslAuthenticate
        call(s, 17, 1, mechanism="PLAIN")
        s.sendall(frame(3, 12, 2, topics=None))
        assert closed_by_peer(s)


def test_unsupported_mechanism(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        hs = call(s, 17, 1, mechanism="GSSAPI")
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert "PLAIN" in hs.mechanisms
        assert closed_by_peer(s)


def test_pre_auth_frame_cap(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        s.sendall(struct.pack(">i", 1_000_000) + b"\x00" * 64)
        assert closed_by_peer(s)
    # the same size is fine on the PLAINTEXT listener's socket.request.max.bytes (not cut)
    with sasl_sock(broker, "PLAINTEXT") as s:
        s.settimeout(0.3)
        s.sendall(struct.pack(">i", 1_000_000) + b"\x00" * 64)
        with pytest.raises(TimeoutError):
            s.recv(1)


def test_handshake_v0_bare_tokens(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker) as s:
        assert call(s, 17, 0, mechanism="PLAIN").error_code == 0
        token = b"\x00alice\x00alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(4) == b"\x00\x00\x00\x00"  # PLAIN's empty challenge
        assert call(s, 18, 3, 5, client_software_name="t",
                    client_software_version="1").error_code == 0
    with sasl_sock(broker) as s:
        call(s, 17, 0, mechanism="PLAIN")
        token = b"\x00alice\x00bad"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert closed_by_peer(s)


def test_sasl_apis_on_a_plaintext_listener(broker: EmbeddedBroker) -> None:
    with sasl_sock(broker, "PLAINTEXT") as s:
        assert call(s, 17, 1, mechanism="PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert call(s, 36, 2, 2, auth_bytes=b"x").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_failed_login_answered_at_once_closed_after_the_delay() -> None:
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
             "sasl.jaas.config": JAAS, "connection.failed.authentication.delay.ms": 60000}
    with EmbeddedBroker(props) as b, socket.create_connection(("127.0.0.1", b.port),
                                                              timeout=10) as s:
        call(s, 17, 1, mechanism="PLAIN")
        auth = call(s, 36, 2, 2, auth_bytes=b"\x00alice\x00nope")  # well before 60 s
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        s.sendall(frame(18, 3, 3, client_software_name="t", client_software_version="1"))
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):  # not answered, not closed yet: the delayed close
            s.recv(1)


def test_plain_without_jaas_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"sasl\.jaas\.config"):
        EmbeddedBroker({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                        "sasl.enabled.mechanisms": "PLAIN"}, log_dir=tmp_path).start()
