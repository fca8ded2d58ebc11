"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677): Kafka's ScramFormatter and ScramSaslServer.

A credential is stored as Kafka stores it (salt, StoredKey, ServerKey, iterations), never the
password. The server checks the combined nonce in client-final (a replayed or tampered
message from another exchange carries another nonce), the channel binding, and the proof
with a constant-time compare.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable

from tidelog.protocol.scram import (  # re-exported: the broker's importers name them here
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
    generate_credential,
    hmac_digest,
    salted_password,
    server_signature,
    xor,
)

__all__ = [
    "MAX_ITERATIONS", "MIN_ITERATIONS", "SaslAuthenticationError", "ScramCredential",
    "ScramError", "ScramMechanism", "ScramServer", "credential_from_salted",
    "decode_saslname", "generate_credential", "salted_password",
]


class SaslAuthenticationError(Exception):
    """An authentication failure; the message is what the client is told."""


ScramError = SaslAuthenticationError


def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"Invalid SCRAM message attribute {part!r}")
        out.setdefault(key, value)
    return out


def decode_saslname(name: str) -> str:
    """RFC 5802 5.1: '=2C' is ',' and '=3D' is '='; any other '=' is invalid."""
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid username")
    return name.replace("=2C", ",").replace("=3D", "=")


_PRINTABLE_NONCE = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")

CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]


class ScramServer:
    """One SCRAM exchange: ``evaluate`` client-first, then client-final."""

    def __init__(self, mech: ScramMechanism, lookup: CredentialLookup,
                 nonce: Callable[[], str] | None = None) -> None:
        self.mech = mech
        self.lookup = lookup
        self._nonce = nonce or (lambda: base64.b64encode(os.urandom(24)).decode())
        self.state = "RECEIVE_CLIENT_FIRST"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._combined_nonce = ""

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    def evaluate(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message encoding") from None
        if self.state == "RECEIVE_CLIENT_FIRST":
            return self._client_first(text)
        if self.state == "RECEIVE_CLIENT_FINAL":
            return self._client_final(text)
        raise ScramError(f"Unexpected SCRAM message in state {self.state}")

    def _client_first(self, text: str) -> bytes:
        self.state = "FAILED"
        # gs2-header: "n,," or "n,a=authzid," ("y"/"p" mean channel binding Kafka lacks)
        match = re.match(r"^(n|y),(a=[^,]*)?,", text)
        if match is None:
            raise ScramError("Invalid SCRAM client first message (gs2 header)")
        self._gs2_header = match.group(0)
        bare = text[match.end():]
        attrs = _attrs(bare)
        if "n" not in attrs or "r" not in attrs or not _PRINTABLE_NONCE.match(attrs["r"]):
            raise ScramError("Invalid SCRAM client first message")
        if "m" in attrs:
            raise ScramError("SCRAM mandatory extensions are not supported")
        username = decode_saslname(attrs["n"])
        authzid = match.group(2)
        if authzid and decode_saslname(authzid[2:]) != username:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        credential = self.lookup(username, self.mech)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.username = username
        self._credential = credential
        self._client_first_bare = bare
        self._combined_nonce = attrs["r"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        self.state = "RECEIVE_CLIENT_FINAL"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self.state = "FAILED"
        credential = self._credential
        assert credential is not None
        head, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message (no proof)")
        attrs = _attrs(head)
        # Kafka checks endsWith, not equality: librdkafka before 1.9 (kcat's) repeats its
        # client nonce in front. The fresh server nonce must still be there, and the proof
        # covers the whole message, so a changed prefix fails the proof below.
        if not attrs.get("r", "").endswith(self._combined_nonce):
            raise ScramError("Invalid SCRAM client final message: nonce does not match")
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attrs.get("c") != expected_binding:
            raise ScramError("Invalid SCRAM client final message: channel binding")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client proof encoding") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{head}".encode()
        client_signature = hmac_digest(self.mech, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = xor(proof, client_signature)
        computed = hashlib.new(self.mech.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        self.state = "COMPLETE"
        signature = server_signature(self.mech, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(signature)
