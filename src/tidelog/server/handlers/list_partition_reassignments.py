"""ListPartitionReassignments (key 46): AlterPartitionReassignments completes at once on one
broker, so none is ever in progress: the answer lists nothing, whatever is asked. Needs
DESCRIBE on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    code = ErrorCode.NONE
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return make(cls, throttle_time=0, error_code=code, error_message=None, topics=())
