"""DescribeAcls (key 29): needs DESCRIBE on the cluster; ACLs matching the filter, grouped
by resource pattern."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.acl_wire import filter_from_request
from ..security.types import AclOperation, ResourceType

API_KEY = 29
MIN_VERSION = 1  # v0 removed in Kafka 4.0 (KIP-896)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "resources")
    acls_cls = nested(rcls, "acls")

    def error(code: int, message: str | None) -> Any:
        return make(cls, throttle_time=0, error_code=code, error_message=message, resources=())

    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    try:
        flt = filter_from_request(request)
    except ValueError as exc:
        return error(ErrorCode.INVALID_REQUEST, str(exc))
    groups: dict[tuple[int, str, int], list[Any]] = {}
    for acl in authorizer.acls(flt):
        key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
        groups.setdefault(key, []).append(
            make(acls_cls, principal=acl.principal, host=acl.host,
                 operation=int(acl.operation), permission_type=int(acl.permission_type))
        )
    resources = tuple(
        make(rcls, resource_type=rt, resource_name=name, pattern_type=pt, acls=tuple(items))
        for (rt, name, pt), items in groups.items()
    )
    return make(cls, throttle_time=0, error_code=0, error_message=None, resources=resources)
