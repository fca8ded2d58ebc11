"""CreateAcls (key 30): needs ALTER on the cluster; each creation validated as Kafka's
AclControlManager does, then stored (persisted) by the authorizer."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.acl_wire import binding_from_creation
from ..security.types import AclOperation, ResourceType

API_KEY = 30
MIN_VERSION = 1  # v0 removed in Kafka 4.0 (KIP-896)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    authorizer = ctx.broker.authorizer

    def result(code: int, message: str | None = None) -> Any:
        return make(rcls, error_code=code, error_message=message)

    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return make(cls, throttle_time=0, results=tuple(result(code) for _ in request.creations))
    if authorizer is None:
        code = ErrorCode.SECURITY_DISABLED
        msg = "No Authorizer is configured."
        return make(
            cls, throttle_time=0, results=tuple(result(code, msg) for _ in request.creations)
        )
    results, valid = [], []
    for creation in request.creations:
        try:
            binding = binding_from_creation(creation)
        except ValueError as exc:
            results.append(result(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        valid.append(binding)
        results.append(result(0))
    if valid:
        authorizer.create(valid)
    return make(cls, throttle_time=0, results=tuple(results))
