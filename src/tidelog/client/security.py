"""TLS and SASL (PLAIN, SCRAM-SHA-256/512) for the hand-written client (conn.py).

``ClientSecurity.from_properties`` reads a client's settings under librdkafka's names or
Java's (``security.protocol``, ``sasl.mechanism``, ``sasl.username``/``sasl.password`` or a
``sasl.jaas.config`` with username/password, ``ssl.ca.location`` or
``ssl.truststore.location`` (PEM), ``ssl.certificate.location`` + ``ssl.key.location`` or a
PEM ``ssl.keystore.location``, ``ssl.endpoint.identification.algorithm``), so the same
client.properties serves Kafka's tools, the CLI and the Spark source.
"""

from __future__ import annotations

import base64
import hmac
import os
import re
import socket
import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.protocol.scram import (
    ScramMechanism,
    client_proof,
    credential_from_salted,
    salted_password,
    server_signature,
)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SCRAM_NAMES = tuple(m.mechanism_name for m in ScramMechanism)
_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')

Call = Callable[[int, int, dict[str, Any]], Any]
# yields (api key, version, body), receives each response
SaslExchange = Generator[tuple[int, int, dict[str, Any]], Any, None]


class SaslError(Exception):
    """Authentication failed or was refused (the broker's message when it sent one)."""


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "GSSAPI"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.security_protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol must be one of {', '.join(PROTOCOLS)}")
        if self.sasl and self.sasl_mechanism not in ("PLAIN", *_SCRAM_NAMES):
            raise ValueError(f"sasl.mechanism {self.sasl_mechanism} is not supported")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ClientSecurity:
        p = {str(k).strip(): str(v).strip() for k, v in props.items() if v is not None}
        username, password = p.get("sasl.username"), p.get("sasl.password")
        if username is None and "sasl.jaas.config" in p:
            found = dict(_JAAS_OPTION.findall(p["sasl.jaas.config"]))
            username, password = found.get("username"), found.get("password")
        keystore = p.get("ssl.keystore.location")  # PEM: key and chain in one file
        return cls(
            security_protocol=p.get("security.protocol", "PLAINTEXT").upper(),
            sasl_mechanism=p.get("sasl.mechanism", p.get("sasl.mechanisms", "GSSAPI")),
            sasl_username=username,
            sasl_password=password,
            ssl_cafile=p.get("ssl.ca.location") or p.get("ssl.truststore.location"),
            ssl_certfile=p.get("ssl.certificate.location") or keystore,
            ssl_keyfile=p.get("ssl.key.location") or keystore,
            ssl_check_hostname=p.get("ssl.endpoint.identification.algorithm", "https") != "",
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context (verifying the broker against the CA file), None without TLS."""
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=self.ssl_cafile)
        ctx.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile:
            ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return ctx

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The TLS socket over ``sock`` (verifying the broker against the CA file)."""
        ctx = self.ssl_context()
        if ctx is None:
            return sock
        return ctx.wrap_socket(sock, server_hostname=host)

    def authenticate(self, call: Call) -> None:
        """Run :meth:`sasl_exchange` over a blocking ``call``."""
        exchange = self.sasl_exchange()
        try:
            request = next(exchange)
            while True:
                request = exchange.send(call(*request))
        except StopIteration:
            return

    def sasl_exchange(self) -> SaslExchange:
        """SaslHandshake v1 then SaslAuthenticate v2 tokens until the mechanism completes,
        without I/O: yields each request as (api key, version, body) and takes its response
        back through ``send`` (the blocking and the asyncio clients both drive it)."""
        if not self.sasl:
            return
        hs = yield (17, 1, {"mechanism": self.sasl_mechanism})
        if int(hs.error_code) != 0:
            raise SaslError(f"SaslHandshake: error {int(hs.error_code)}, broker offers "
                            f"{', '.join(hs.mechanisms)}")
        if self.sasl_username is None or self.sasl_password is None:
            raise SaslError("sasl.username and sasl.password are required")
        if self.sasl_mechanism == "PLAIN":
            yield from _auth_step(
                b"\0" + self.sasl_username.encode() + b"\0" + self.sasl_password.encode()
            )
            return
        mech = ScramMechanism.by_name(self.sasl_mechanism)
        assert mech is not None  # checked in __post_init__
        yield from _scram(mech, self.sasl_username, self.sasl_password)


def _auth_step(token: bytes) -> Generator[tuple[int, int, dict[str, Any]], Any, bytes]:
    resp = yield (36, 2, {"auth_bytes": token})
    if int(resp.error_code) != 0:
        raise SaslError(resp.error_message or f"SaslAuthenticate error {int(resp.error_code)}")
    return bytes(resp.auth_bytes)


def _scram(mech: ScramMechanism, user: str, password: str) -> SaslExchange:
    """RFC 5802 client side; checks the server's signature."""
    nonce = base64.b64encode(os.urandom(24)).decode()
    name = user.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={name},r={nonce}"
    server_first = (yield from _auth_step(f"n,,{first_bare}".encode())).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    if not attrs.get("r", "").startswith(nonce):
        raise SaslError("SCRAM: the server's nonce does not extend ours")
    salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
    salted = salted_password(mech, password.encode(), salt, iterations)
    final_bare = f"c=biws,r={attrs['r']}"
    auth = f"{first_bare},{server_first},{final_bare}".encode()
    proof = client_proof(mech, salted, auth)
    token = f"{final_bare},p={base64.b64encode(proof).decode()}".encode()
    server_final = (yield from _auth_step(token)).decode()
    server_key = credential_from_salted(mech, salted, salt, iterations).server_key
    expected = base64.b64encode(server_signature(mech, server_key, auth)).decode()
    if not hmac.compare_digest(server_final, f"v={expected}"):
        raise SaslError("SCRAM: the server's signature does not match")
