"""SASL/PLAIN against users from Kafka's PlainLoginModule JAAS text."""

from __future__ import annotations

import pytest

from tidelog.server.security.plain import PlainServer, parse_jaas, plain_users
from tidelog.server.security.scram import SaslAuthenticationError

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
    '   username="admin" password="admin-secret"\n'
    '   user_admin="admin-secret"\n   user_alice="alice \\"quoted\\" pw";'
)


def test_jaas_users() -> None:
    module, options = parse_jaas(JAAS)
    assert module.endswith("PlainLoginModule") and options["username"] == "admin"
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": 'alice "quoted" pw'}
    with pytest.raises(ValueError):
        plain_users("org.apache.kafka.common.security.scram.ScramLoginModule required;")
    with pytest.raises(ValueError):
        parse_jaas("nonsense")


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        (b"\x00admin\x00admin-secret", True),
        (b"admin\x00admin\x00admin-secret", True),
        (b"\x00admin\x00wrong", False),
        (b"\x00nobody\x00admin-secret", False),
        (b"other\x00admin\x00admin-secret", False),
        (b"\x00admin", False),
        (b"\x00\x00pw", False),
        (b"\x00admin\x00", False),
    ],
)
def test_plain(token: bytes, ok: bool) -> None:
    server = PlainServer(plain_users(JAAS))
    if ok:
        assert server.evaluate(token) == b"" and server.complete
        assert server.username == "admin"
    else:
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(token)
        assert not server.complete
