"""What the broker builds for security: per-listener TLS/SASL settings, the SCRAM credential
store and the authorizer (``Broker.__init__`` keeps each as a typed field)."""

from __future__ import annotations

from tidelog.config.broker_config import BrokerConfig

from .authorizer import AUTHORIZER_CLASSES, StandardAuthorizer, parse_super_users
from .credentials import CredentialStore
from .session import ListenerSecurity, listener_security


def listener_securities(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    """Every listener's security protocol, TLS context and SASL mechanisms, by name."""
    return {lst.name: listener_security(config, lst.name) for lst in config.listeners}


def credential_store(config: BrokerConfig) -> CredentialStore:
    return CredentialStore(config.log_dirs[0])


def make_authorizer(config: BrokerConfig) -> StandardAuthorizer | None:
    """``authorizer.class.name``'s authorizer; None when no authorizer is configured."""
    class_name = str(config.values["authorizer.class.name"] or "").strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASSES:
        raise ValueError(f"authorizer.class.name: unknown authorizer {class_name}")
    return StandardAuthorizer(
        config.log_dirs[0],
        parse_super_users(str(config.values["super.users"] or "")),
        bool(config.values["allow.everyone.if.no.acl.found"]),
    )
