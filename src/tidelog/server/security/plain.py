"""SASL/PLAIN (RFC 4616) with users from Kafka's JAAS text (PlainLoginModule's
``user_<name>="<password>"`` options), as Kafka's PlainServerCallbackHandler reads them."""

from __future__ import annotations

import hmac
import re

from .scram import SaslAuthenticationError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule> <flag> key="value" ...;`` -> (login module, options)."""
    body = text.strip().rstrip(";").strip()
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ValueError("sasl.jaas.config must be '<LoginModule> <flag> key=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = parts[2] if len(parts) == 3 else ""
    for m in _OPTION.finditer(rest):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", value)
    return parts[0], options


def plain_users(jaas: str | None) -> dict[str, str]:
    """The ``user_<name>`` entries of a PlainLoginModule JAAS text."""
    if not jaas:
        return {}
    module, options = parse_jaas(jaas)
    if module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"PLAIN needs {PLAIN_LOGIN_MODULE}, got {module}")
    return {k[5:]: v for k, v in options.items() if k.startswith("user_")}


class PlainServer:
    """One PLAIN exchange: a single ``authzid NUL username NUL password`` message."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("PLAIN authentication already complete")
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response encoding") from None
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare even for an unknown user so the timing does not tell which names exist
        ok = hmac.compare_digest(password.encode(), (expected or "\x00" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        self.username = username
        self.complete = True
        return b""
