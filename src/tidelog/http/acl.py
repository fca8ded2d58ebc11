"""The console's authorization: with an authorizer configured, what an HTTP client may see or
do is asked of it as Kafka's handler would, for ``User:ANONYMOUS`` at the client's address
(the console has no login of its own, so ACLs must grant the anonymous user explicitly)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from tidelog.server.security.types import ANONYMOUS, AclOperation, ResourceType

if TYPE_CHECKING:
    from tidelog.server.broker import Broker


def allowed(broker: Broker, request: web.Request, op: AclOperation, rtype: ResourceType,
            name: str) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return bool(authorizer.authorize(ANONYMOUS, request.remote or "", op, rtype, name))


def authorize(broker: Broker, request: web.Request, op: AclOperation, rtype: ResourceType,
              name: str) -> None:
    """Raise HTTPForbidden unless ``allowed``."""
    if not allowed(broker, request, op, rtype, name):
        raise web.HTTPForbidden(text=f"{op.name} on {rtype.name} {name!r} is not allowed "
                                     f"for {ANONYMOUS} by the ACLs")  # fmt: skip


def authorize_read(broker: Broker, request: web.Request, topic: str) -> None:
    authorize(broker, request, AclOperation.READ, ResourceType.TOPIC, topic)
