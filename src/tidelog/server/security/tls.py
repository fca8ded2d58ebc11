"""TLS for SSL and SASL_SSL listeners from Kafka's PEM ``ssl.*`` settings, and the client
certificate's principal (Kafka's DefaultSslEngineFactory and SslPrincipalMapper).

``ssl.keystore.location`` is one PEM file with the private key and its certificate chain;
``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` give them inline. The truststore is
``ssl.truststore.location`` or inline ``ssl.truststore.certificates``.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}

Lookup = Callable[[str], Any]


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # ssl can only load a key pair from a file: write a private 0600 temp file, load, delete
    fd, path = tempfile.mkstemp(prefix="tidelog-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def server_context(value: Lookup) -> ssl.SSLContext:
    """An SSLContext from ``value(key)``, a listener's view of the broker's ssl.* keys."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = [p for p in value("ssl.enabled.protocols") or [] if p in _TLS_VERSIONS]
    if protocols:
        ctx.minimum_version = min(_TLS_VERSIONS[p] for p in protocols)
        ctx.maximum_version = max(_TLS_VERSIONS[p] for p in protocols)
    password = value("ssl.key.password")
    location = value("ssl.keystore.location")
    if location:
        ctx.load_cert_chain(location, password=password)
    elif value("ssl.keystore.certificate.chain") and value("ssl.keystore.key"):
        _load_inline_chain(
            ctx, value("ssl.keystore.certificate.chain"), value("ssl.keystore.key"), password
        )
    else:
        raise ValueError(
            "an SSL listener needs ssl.keystore.location or ssl.keystore.certificate.chain "
            "with ssl.keystore.key (PEM)"
        )
    if value("ssl.truststore.location"):
        ctx.load_verify_locations(cafile=value("ssl.truststore.location"))
    elif value("ssl.truststore.certificates"):
        ctx.load_verify_locations(cadata=value("ssl.truststore.certificates"))
    ctx.verify_mode = _CLIENT_AUTH[str(value("ssl.client.auth") or "none").lower()]
    ciphers = [c for c in value("ssl.cipher.suites") or [] if c]
    if ciphers:
        ctx.set_ciphers(":".join(ciphers))
    return ctx


# X.500 attribute names as Java's X500Principal.getName() (RFC 2253) prints them
_RDN_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    value = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if value.startswith(("#", " ")):
        value = "\\" + value
    if value.endswith(" "):
        value = value[:-1] + "\\ "
    return value


def distinguished_name(peercert: dict[str, Any]) -> str:
    """The subject in RFC 2253 form: most specific RDN first, as Kafka sees it."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: ``RULE:pattern/replacement/[LU]`` ... or DEFAULT."""

    _RULE = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)\s*)\s*(,|$)")

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        pos = 0
        rules = rules.strip() or "DEFAULT"
        while pos < len(rules):
            m = self._RULE.match(rules, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"invalid ssl.principal.mapping.rules at {rules[pos:]!r}")
            if m.group(1) == "DEFAULT":
                self.rules.append(None)
            else:
                # Java's $1 group references are Python's \1
                replacement = re.sub(r"\$(\d)", r"\\\1", m.group(4))
                self.rules.append((re.compile(m.group(2)), replacement, m.group(6)))
            pos = m.end()

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn, count=1)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        raise ValueError(f"no ssl.principal.mapping.rules rule applies to {dn!r}")
