"""Per-listener security and the per-connection SASL state machine (Kafka's
ChannelBuilders + SaslServerAuthenticator).

A SASL connection may send only ApiVersions and SaslHandshake, then SaslAuthenticate until
the mechanism completes; anything else before that closes the connection (Kafka's
IllegalSaslStateException), and frames are capped at ``sasl.server.max.receive.size`` until
then. A failed exchange is answered with SASL_AUTHENTICATION_FAILED at once; the connection
is closed after ``connection.failed.authentication.delay.ms`` (Kafka's delayed close).
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .plain import PlainServer, plain_users
from .scram import SaslAuthenticationError, ScramMechanism, ScramServer
from .tls import SslPrincipalMapper, distinguished_name, server_context
from .types import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig

    from .credentials import CredentialStore

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class ListenerSecurity:
    """What one listener needs: its TLS context, SASL mechanisms, PLAIN users, caps."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    max_receive_size: int = 524288
    failed_auth_delay_ms: int = 100
    reauth_ms: int = 0

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def ssl_principal(self, peercert: dict[str, Any] | None) -> KafkaPrincipal:
        """Kafka's DefaultKafkaPrincipalBuilder for SSL: the mapped subject DN, or
        ANONYMOUS without a client certificate."""
        if not peercert or self.principal_mapper is None:
            return ANONYMOUS
        return KafkaPrincipal("User", self.principal_mapper.name(distinguished_name(peercert)))


def listener_security(config: BrokerConfig, name: str) -> ListenerSecurity:
    protocol = config.security_protocol(name)

    def value(key: str) -> Any:
        return config.listener_value(name, key)

    sec = ListenerSecurity(
        name,
        protocol,
        max_receive_size=int(value("sasl.server.max.receive.size")),
        failed_auth_delay_ms=int(value("connection.failed.authentication.delay.ms")),
        reauth_ms=int(value("connections.max.reauth.ms") or 0),
    )
    if protocol in ("SSL", "SASL_SSL"):
        sec.ssl_context = server_context(value)
        sec.principal_mapper = SslPrincipalMapper(str(value("ssl.principal.mapping.rules")))
    if sec.sasl:
        enabled = value("sasl.enabled.mechanisms")
        if isinstance(enabled, str):
            enabled = [m.strip() for m in enabled.split(",") if m.strip()]
        sec.mechanisms = tuple(m for m in enabled if m in SUPPORTED_MECHANISMS)
        if not sec.mechanisms:
            raise ValueError(
                f"listener {name}: sasl.enabled.mechanisms must include one of "
                f"{', '.join(SUPPORTED_MECHANISMS)}"
            )
        if "PLAIN" in sec.mechanisms:
            key = f"listener.name.{name.lower()}.plain.sasl.jaas.config"
            jaas = config.originals.get(key) or config.originals.get("sasl.jaas.config")
            if not jaas:  # Kafka refuses to start without the PlainLoginModule section
                raise ValueError(f"listener {name} enables PLAIN: set {key} (or "
                                 "sasl.jaas.config) with PlainLoginModule user_<name> entries")
            sec.plain_users = plain_users(jaas)
    return sec


class SaslSession:
    """One connection's authentication state."""

    def __init__(self, listener: ListenerSecurity, credentials: CredentialStore) -> None:
        self.listener = listener
        self.credentials = credentials
        self.state = "HANDSHAKE_OR_VERSIONS"
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._server: PlainServer | ScramServer | None = None
        # SaslHandshake v0: tokens follow as bare frames, not SaslAuthenticate requests
        self.raw_tokens = False
        # KIP-368: with connections.max.reauth.ms the session ends at expires_at (monotonic
        # seconds) unless the client re-authenticates as the same principal before then
        self.expires_at: float | None = None
        self._previous: KafkaPrincipal | None = None

    @property
    def can_reauthenticate(self) -> bool:
        return self.state == "COMPLETE" and self.listener.reauth_ms > 0 and not self.raw_tokens

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE"

    def allows(self, api_key: int) -> bool:
        """May this API be sent now? (only what the SASL state machine expects)"""
        if self.state == "COMPLETE":
            # an expired session may only re-authenticate (Kafka closes it otherwise)
            return not self.expired or api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state == "HANDSHAKE_OR_VERSIONS":
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state == "HANDSHAKE":
            return api_key == SASL_HANDSHAKE
        return self.state == "AUTHENTICATE" and api_key == SASL_AUTHENTICATE

    def handshake(self, mechanism: str, version: int = 1) -> bool:
        """True when ``mechanism`` is enabled here (then SaslAuthenticate follows, or bare
        tokens after a v0 handshake)."""
        if mechanism not in self.listener.mechanisms:
            self.state = "FAILED"
            return False
        if self.state == "COMPLETE":  # re-authentication: the principal must not change
            self._previous = self.principal
        self.raw_tokens = version == 0
        self.mechanism = mechanism
        scram = ScramMechanism.by_name(mechanism)
        if scram is not None:
            self._server = ScramServer(scram, self.credentials.get)
        else:
            self._server = PlainServer(self.listener.plain_users)
        self.state = "AUTHENTICATE"
        return True

    def authenticate(self, token: bytes) -> bytes:
        """Feed one client token; raises SaslAuthenticationError on failure."""
        server = self._server
        if self.state != "AUTHENTICATE" or server is None:
            raise SaslAuthenticationError("Unexpected SaslAuthenticate request")
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationError:
            self.state = "FAILED"
            raise
        if server.complete:
            assert server.username is not None
            principal = KafkaPrincipal("User", server.username)
            if self._previous is not None and principal != self._previous:
                self.state = "FAILED"
                raise SaslAuthenticationError(
                    "Cannot change principals during re-authentication from "
                    f"{self._previous}: {principal}"
                )
            self.principal = principal
            self.state = "COMPLETE"
            if self.listener.reauth_ms > 0:
                self.expires_at = time.monotonic() + self.listener.reauth_ms / 1000
        return challenge
