"""SCRAM-SHA-256/512 key derivation (RFC 5802, RFC 7677), shared by both ends.

The broker's exchange (server/security/scram.py, Kafka's ScramSaslServer) and our client's
(client/security.py) derive the same keys; this module holds that arithmetic once, with no
I/O. A credential is what Kafka stores (salt, StoredKey, ServerKey, iterations), never the
password.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
from dataclasses import dataclass


class ScramMechanism(enum.Enum):
    # (mechanism name, hashlib name, Kafka's wire code in AlterUserScramCredentials)
    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def hash_name(self) -> str:
        return self.value[1]

    @property
    def code(self) -> int:
        return self.value[2]

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_code(cls, code: int) -> ScramMechanism | None:
        return next((m for m in cls if m.code == code), None)


# Kafka's ScramMechanism.minIterations / the KRaft controller's upper bound
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def hmac_digest(mech: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mech.hash_name).digest()


def salted_password(mech: ScramMechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 is PBKDF2 with HMAC as the PRF."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password, salt, iterations)


def credential_from_salted(
    mech: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    client_key = hmac_digest(mech, salted, b"Client Key")
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    server_key = hmac_digest(mech, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def generate_credential(
    mech: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    salted = salted_password(mech, password.encode(), salt, iterations)
    return credential_from_salted(mech, salted, salt, iterations)


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def client_proof(mech: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    """ClientKey XOR HMAC(StoredKey, AuthMessage): what the client sends as p=."""
    client_key = hmac_digest(mech, salted, b"Client Key")
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    return xor(client_key, hmac_digest(mech, stored_key, auth_message))


def server_signature(mech: ScramMechanism, server_key: bytes, auth_message: bytes) -> bytes:
    """HMAC(ServerKey, AuthMessage): what the server sends as v=."""
    return hmac_digest(mech, server_key, auth_message)
