"""DeleteAcls (key 31): needs ALTER on the cluster; per filter, the ACLs it removed."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.acl_wire import filter_from_request
from ..security.authorizer import AclBindingFilter
from ..security.types import AclOperation, ResourceType

API_KEY = 31
MIN_VERSION = 1  # v0 removed in Kafka 4.0 (KIP-896)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    fcls = nested(cls, "filter_results")
    mcls = nested(fcls, "matching_acls")

    def failed(code: int, message: str | None) -> Any:
        return make(
            cls,
            throttle_time=0,
            filter_results=tuple(
                make(fcls, error_code=code, error_message=message, matching_acls=())
                for _ in request.filters
            ),
        )

    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return failed(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    filters: list[AclBindingFilter | str] = []
    for f in request.filters:
        try:
            filters.append(filter_from_request(f))
        except ValueError as exc:
            filters.append(str(exc))
    removed = iter(authorizer.delete([f for f in filters if not isinstance(f, str)]))
    results = []
    for f in filters:
        if isinstance(f, str):
            results.append(make(fcls, error_code=ErrorCode.INVALID_REQUEST, error_message=f,
                                matching_acls=()))
            continue
        matching = tuple(
            make(mcls, error_code=0, error_message=None, resource_type=int(a.resource_type),
                 resource_name=a.resource_name, pattern_type=int(a.pattern_type),
                 principal=a.principal, host=a.host, operation=int(a.operation),
                 permission_type=int(a.permission_type))
            for a in next(removed)
        )
        results.append(make(fcls, error_code=0, error_message=None, matching_acls=matching))
    return make(cls, throttle_time=0, filter_results=tuple(results))
