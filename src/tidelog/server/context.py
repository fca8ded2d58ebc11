"""What a handler gets besides its request (Kafka's RequestContext)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.protocol.codec import RequestHeader

from .security.session import SaslSession
from .security.types import (
    ANONYMOUS,
    AclOperation,
    KafkaPrincipal,
    ResourceType,
    operations_bitfield,
    supported_operations,
)

if TYPE_CHECKING:
    from .broker import Broker


@dataclass(slots=True)
class ConnectionState:
    """What a connection's requests share: the last produce request in its order chain (an
    idempotent producer pipelines them; one that went off the loop holds the later ones),
    the loop time until which a quota throttle holds its pipelined requests, and the client
    software the connection's ApiVersions named."""

    produce_tail: asyncio.Future[None] | None = None
    throttled_until: float | None = None
    # what the client said it is in ApiVersions v3+ (KIP-511), for client metrics matching
    client_software_name: str = ""
    client_software_version: str = ""


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str = ""
    client_port: int = 0
    # set by a handler that wants the connection closed after this request (Kafka closes
    # the connection when an acks=0 produce fails: the client has no other way to learn it)
    close_reason: str | None = None
    # ... after this many ms (failed authentication: Kafka delays the close, not the answer)
    close_delay_ms: int = 0
    # who is asking: User:ANONYMOUS on PLAINTEXT, the SASL/TLS identity once authenticated
    principal: KafkaPrincipal = ANONYMOUS
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    # a client quota's throttle (ms): the connection mutes itself for as long after
    # answering (KIP-219), set through tidelog.server.quota
    throttle_ms: int = 0
    # the connection's SASL state (security/session.py SaslSession), None on other listeners
    session: SaslSession | None = None
    # the connection's own state (a context made outside a connection gets a fresh one)
    connection_state: ConnectionState = field(default_factory=ConnectionState)

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """The one authorization call every handler makes (Kafka's AuthHelper.authorize).
        True when no authorizer is configured."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return bool(authorizer.authorize(self.principal, self.client_host, operation,
                                         resource_type, name))

    def authorize_by_resource_type(
        self, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do ``operation`` on some resource of the type? (Kafka's
        authorizeByResourceType, e.g. an idempotent producer allowed to WRITE some topic.)"""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return bool(authorizer.authorize_by_resource_type(
            self.principal, self.client_host, operation, resource_type))

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The bit field of ``include_*_authorized_operations`` answers: every supported
        operation without an authorizer, else only the allowed ones."""
        ops = supported_operations(resource_type)
        if self.broker.authorizer is not None:
            ops = frozenset(op for op in ops if self.authorize(op, resource_type, name))
        return operations_bitfield(ops)

    @property
    def endpoint(self) -> tuple[str, int]:
        """Advertised (host, port) of the listener this request came in on: Kafka answers
        Metadata, FindCoordinator and DescribeCluster with the client's own listener."""
        return self.broker.endpoint(self.listener_name)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
