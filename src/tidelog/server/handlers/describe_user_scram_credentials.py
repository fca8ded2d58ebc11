"""DescribeUserScramCredentials (key 50): needs DESCRIBE on the cluster; mechanisms and
iterations per user (never salts or keys), as Kafka's ScramControlManager describes them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.types import AclOperation, ResourceType

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    ccls = nested(rcls, "credential_infos")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None, results=())
    users = ctx.broker.credentials.users()
    asked = sorted(users) if request.users is None else [u.name for u in request.users]
    counts = Counter(asked)
    results, seen = [], set()
    for name in asked:
        if name in seen:
            continue
        seen.add(name)
        if counts[name] > 1:
            code, msg, infos = ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials "\
                "for the same user twice in a single request", ()
        elif name not in users:
            code, msg, infos = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user "\
                "credential that does not exist", ()
        else:
            code, msg = ErrorCode.NONE, None
            infos = tuple(make(ccls, mechanism=m.code, iterations=c.iterations)
                          for m, c in sorted(users[name].items(), key=lambda kv: kv[0].code))
        results.append(make(rcls, user=name, error_code=code, error_message=msg,
                            credential_infos=infos))
    return make(cls, throttle_time=0, error_code=0, error_message=None, results=tuple(results))
