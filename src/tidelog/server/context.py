"""What a handler gets besides its request (Kafka's RequestContext)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelog.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from .broker import Broker


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: Broker
    client_host: str = ""
    client_port: int = 0
    # set by a handler that wants the connection closed after this request (Kafka closes
    # the connection when an acks=0 produce fails: the client has no other way to learn it)
    close_reason: str | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
