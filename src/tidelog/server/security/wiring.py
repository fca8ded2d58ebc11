"""What the broker sets up for security: per-listener TLS/SASL settings, the SCRAM credential
store, the authorizer, and the listeners after the first one."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .authorizer import AUTHORIZER_CLASSES, StandardAuthorizer, parse_super_users
from .credentials import CredentialStore
from .session import listener_security

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)


def setup_security(broker: Broker) -> None:
    """Set ``listener_security``, ``credentials`` and ``authorizer`` on the broker."""
    config = broker.config
    log_dir = config.log_dirs[0]
    broker.listener_security = {
        lst.name: listener_security(config, lst.name) for lst in config.listeners
    }
    broker.credentials = CredentialStore(log_dir)
    broker.authorizer = None
    class_name = str(config.values["authorizer.class.name"] or "").strip()
    if class_name:
        if class_name not in AUTHORIZER_CLASSES:
            raise ValueError(f"authorizer.class.name: unknown authorizer {class_name}")
        broker.authorizer = StandardAuthorizer(
            log_dir,
            parse_super_users(str(config.values["super.users"] or "")),
            bool(config.values["allow.everyone.if.no.acl.found"]),
        )


async def start_other_listeners(broker: Broker) -> None:
    """Serve every listener after the first (which ``Broker.start`` binds itself)."""
    from ..connection import KafkaConnection

    loop = asyncio.get_running_loop()
    broker.bound_ports = {broker.config.listener.name: broker.bound_port}
    broker.other_servers = []
    for lst in broker.config.listeners[1:]:
        sec = broker.listener_security[lst.name]
        server = await loop.create_server(
            lambda sec=sec: KafkaConnection(broker, sec),  # type: ignore[misc]
            lst.host, lst.port, reuse_address=True, ssl=sec.ssl_context,
        )
        broker.other_servers.append(server)
        broker.bound_ports[lst.name] = server.sockets[0].getsockname()[1]
        log.info("listener %s (%s) on %s:%d", lst.name, sec.protocol, lst.host,
                 broker.bound_ports[lst.name])


async def stop_other_listeners(broker: Broker) -> None:
    servers: list[Any] = getattr(broker, "other_servers", [])
    for server in servers:
        server.close()
    for server in servers:
        await server.wait_closed()
    broker.other_servers = []


def endpoint(broker: Broker, listener_name: str) -> tuple[str, int]:
    """The advertised host and port of a listener (the one a request came in on): Kafka
    answers Metadata/FindCoordinator with the endpoints of the client's own listener."""
    config = broker.config
    adv = config.advertised.get(listener_name)
    if adv is None or listener_name == config.listener.name:
        return broker.advertised_host, broker.advertised_port
    return adv.host, adv.port or broker.bound_ports.get(listener_name, 0)
