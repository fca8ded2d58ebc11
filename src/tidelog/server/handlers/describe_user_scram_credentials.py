"""DescribeUserScramCredentials (key 50): needs DESCRIBE on the cluster; mechanisms and
iterations per user (never salts or keys), as Kafka's ScramControlManager describes them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.scram import ScramCredential, ScramMechanism
from ..security.types import AclOperation, ResourceType

Users = dict[str, dict[ScramMechanism, ScramCredential]]

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    ccls = nested(rcls, "credential_infos")
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        # Kafka's getErrorResponse: the error with its message
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Cluster authorization failed.", results=())
    users = ctx.broker.credentials.users()
    if not request.users:  # null or empty: every user with a credential, sorted by name
        results = [_described(rcls, ccls, name, users) for name in sorted(users)]
    else:
        asked = [u.name for u in request.users]
        counts = Counter(asked)
        results = [_result(rcls, ccls, name, counts[name], users) for name in dict.fromkeys(asked)]
    return make(cls, throttle_time=0, error_code=0, error_message=None, results=tuple(results))


def _result(rcls: Any, ccls: Any, name: str, count: int, users: Users) -> Any:
    """One asked user, as ZkAdminManager.describeUserScramCredentials answers it."""
    if not name:
        return _error(rcls, name, ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty")
    if count > 1:
        return _error(rcls, name, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                      "credentials for the same user twice in a single request")
    if name not in users:
        return _error(rcls, name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user "
                      f"credential that does not exist: {name}")
    return _described(rcls, ccls, name, users)


def _described(rcls: Any, ccls: Any, name: str, users: Users) -> Any:
    infos = tuple(make(ccls, mechanism=m.code, iterations=c.iterations)
                  for m, c in sorted(users[name].items(), key=lambda kv: kv[0].code))
    return make(rcls, user=name, error_code=ErrorCode.NONE, error_message=None,
                credential_infos=infos)


def _error(rcls: Any, name: str, code: ErrorCode, message: str) -> Any:
    return make(rcls, user=name, error_code=code, error_message=message, credential_infos=())
