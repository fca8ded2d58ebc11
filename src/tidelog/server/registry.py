"""The handler table: one entry per Kafka API key (Kafka's KafkaApis, split per API).

How to add an API (e.g. the groups session adding FindCoordinator/JoinGroup/...)
--------------------------------------------------------------------------------
Write a module that defines, at module level::

    API_KEY = 10            # Kafka API key
    MIN_VERSION = 0         # lowest version served
    MAX_VERSION = 4         # highest version served (advertised in ApiVersions)

    async def handle(ctx: RequestContext, request) -> response

and put it in ``tidelog/server/handlers/`` or ``tidelog/server/coordinator/group/handlers/``: every module
in those packages that defines ``API_KEY`` is registered at broker start (``discover()`` in
``handler_discovery.py``: this table imports no handler, the handlers import it), so no table
has to be edited. ``request`` is kio's decoded request object for
``ctx.api_version``; build the response with ``tidelog.protocol.kio_util.make(
response_class(API_KEY, ctx.api_version), ...)``. ``handle`` returns one of:

* a kio response object (framed by the connection),
* ``bytes`` or a list of buffers that already form the framed response (fast encoders),
* ``None``: send nothing (Produce with acks=0).

A module may also define ``handle_now(ctx, request)``, tried first: the answer of a request
it can give without suspending (as ``handle``'s, no coroutine made), a coroutine that ends
the request (its appends already made), or ``NOT_NOW``: ``handle`` takes the request as if
nothing had been tried. The connection calls it only where no fault plan wraps handlers.

Handlers run on the broker's event loop; ``ctx.broker`` gives the ReplicaManager
(``ctx.broker.replica_manager``), config, clock and the fetch purgatory. A handler may also be
registered programmatically with ``Registry.register(HandlerSpec(...))`` (tests, plugins).
ApiVersions advertises exactly the registered ranges, so register only what is implemented.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import RequestContext

log = logging.getLogger(__name__)

Handler = Callable[["RequestContext", Any], Awaitable[Any]]
# a handler's try without a coroutine: its answer, a coroutine ending it, or NOT_NOW
HandlerNow = Callable[["RequestContext", Any], Any]
NOT_NOW: Any = type("NotNow", (), {"__repr__": lambda self: "NOT_NOW"})()


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    name: str = ""
    handle_now: HandlerNow | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class Registry:
    def __init__(self) -> None:
        self._specs: dict[int, HandlerSpec] = {}
        # the spec of an API key, or None: the dict's own get (a C call per request)
        self.get: Callable[[int], HandlerSpec | None] = self._specs.get

    def register(self, spec: HandlerSpec) -> None:
        if spec.api_key in self._specs:
            raise ValueError(f"API key {spec.api_key} registered twice ({spec.name})")
        self._specs[spec.api_key] = spec

    def register_module(self, module: ModuleType) -> None:
        self.register(
            HandlerSpec(
                api_key=int(module.API_KEY),
                min_version=int(module.MIN_VERSION),
                max_version=int(module.MAX_VERSION),
                handle=module.handle,
                name=module.__name__,
                handle_now=getattr(module, "handle_now", None),
            )
        )

    def __iter__(self) -> Iterator[HandlerSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.api_key))

    def __len__(self) -> int:
        return len(self._specs)
