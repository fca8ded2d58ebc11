"""SCRAM server: RFC 7677's SHA-256 exchange byte for byte, a second independent client
(kafka-python's) for SHA-512, and tampered/replayed messages rejected."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from tidelog.server.security.scram import (
    SaslAuthenticationError,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_salted,
    generate_credential,
    salted_password,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    return generate_credential(SHA256, "pencil", 4096, salt=RFC_SALT)


def _server(cred: ScramCredential | None, mech: ScramMechanism = SHA256,
            nonce: str = RFC_SERVER_NONCE, user: str = "user") -> ScramServer:
    return ScramServer(mech, lambda u, m: cred if (u, m) == (user, mech) else None,
                       nonce=lambda: nonce)


def test_rfc7677_vector() -> None:
    server = _server(_rfc_credential())
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_stored_keys_only() -> None:
    cred = _rfc_credential()
    salted = salted_password(SHA256, b"pencil", RFC_SALT, 4096)
    assert cred == credential_from_salted(SHA256, salted, RFC_SALT, 4096)
    assert b"pencil" not in cred.stored_key + cred.server_key


@pytest.mark.parametrize("mech", [SHA256, SHA512])
def test_independent_client(mech: ScramMechanism) -> None:
    cred = generate_credential(mech, "s3cret", 4096)
    server = ScramServer(mech, lambda u, m: cred if u == "alice" else None)
    client = ScramClient("alice", "s3cret", mech.mechanism_name)
    server_first = server.evaluate(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.evaluate(client.final_message())
    client.process_server_final_message(server_final)  # verifies the server
    assert server.complete


def test_wrong_password_and_unknown_user() -> None:
    cred = generate_credential(SHA512, "right", 4096)
    server = ScramServer(SHA512, lambda u, m: cred if u == "alice" else None)
    client = ScramClient("alice", "wrong", "SCRAM-SHA-512")
    client.process_server_first_message(server.evaluate(client.first_message()))
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        server.evaluate(client.final_message())
    assert not server.complete
    with pytest.raises(SaslAuthenticationError):
        ScramServer(SHA512, lambda u, m: None).evaluate(b"n,,n=mallory,r=abc")


@pytest.mark.parametrize(
    "final",
    [
        # nonce tampered: the client's part changed
        RFC_CLIENT_FINAL.replace(b"r=rOprNGfwEbeRWgbNEkqO", b"r=XOprNGfwEbeRWgbNEkqO"),
        # nonce tampered: the server's part dropped
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        # a prefix added to the nonce (Kafka accepts the form, the proof no longer matches)
        RFC_CLIENT_FINAL.replace(b"r=rOpr", b"r=XXrOpr"),
        # channel binding changed
        RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),
        # proof flipped
        RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=eHzb"),
        # no proof
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    ],
)
def test_tampered_client_final(final: bytes) -> None:
    server = _server(_rfc_credential())
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(final)
    assert not server.complete


def test_replayed_client_final_rejected() -> None:
    """A captured client-final is worthless in a new exchange: the server's nonce differs."""
    server = _server(_rfc_credential(), nonce="another-server-nonce")
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        server.evaluate(RFC_CLIENT_FINAL)
    # and a completed exchange takes no further messages
    done = _server(_rfc_credential())
    done.evaluate(RFC_CLIENT_FIRST)
    done.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(SaslAuthenticationError):
        done.evaluate(RFC_CLIENT_FINAL)


@pytest.mark.parametrize(
    "first",
    [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user", b"n,,n=us=er,r=abc",
     b"n,a=other,n=user,r=abc", b"n,,m=ext,n=user,r=abc", b"\xff\xfe"],
)
def test_bad_client_first(first: bytes) -> None:
    with pytest.raises(SaslAuthenticationError):
        _server(_rfc_credential()).evaluate(first)


def test_saslname_escapes() -> None:
    cred = generate_credential(SHA256, "pw", 4096)
    server = _server(cred, user="a,b=c")
    reply = server.evaluate(b"n,,n=a=2Cb=3Dc,r=abc")
    assert reply.startswith(b"r=abc")
