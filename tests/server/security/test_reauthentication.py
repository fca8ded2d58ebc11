"""KIP-368 re-authentication with connections.max.reauth.ms: the session lifetime is
announced, the same principal may re-authenticate on the open connection, another principal
may not, and an expired session is closed on its next request."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from sasl_wire_support import call, closed_by_peer, frame

from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedBroker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-pw" user_bob="bob-pw";')


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
             "sasl.jaas.config": JAAS, "connections.max.reauth.ms": 60000,
             "connection.failed.authentication.delay.ms": 0}
    with EmbeddedBroker(props) as b:
        yield b


def login(s: socket.socket, user: str, corr: int) -> object:
    assert call(s, 17, 1, corr, mechanism="PLAIN").error_code == 0
    return call(s, 36, 2, corr + 1, auth_bytes=f"\0{user}\0{user}-pw".encode())


def test_same_principal_reauthenticates(broker: EmbeddedBroker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        first = login(s, "alice", 1)
        assert first.error_code == 0 and first.session_lifetime.total_seconds() == 60
        again = login(s, "alice", 3)
        assert again.error_code == 0
        assert call(s, 3, 12, 5, topics=None).brokers  # still serving


def test_principal_change_refused(broker: EmbeddedBroker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        assert login(s, "alice", 1).error_code == 0
        changed = login(s, "bob", 3)
        assert changed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in changed.error_message
        assert closed_by_peer(s)


def test_expired_session_closed(broker: EmbeddedBroker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        assert login(s, "alice", 1).error_code == 0

        async def expire() -> int:
            n = 0
            for conn in broker.broker.connections:
                if conn.session is not None and conn.session.complete:
                    conn.session.expires_at = 0.0  # as if connections.max.reauth.ms passed
                    n += 1
            return n

        assert broker.run(expire()) >= 1
        s.sendall(frame(3, 12, 3, topics=None))
        assert closed_by_peer(s)
