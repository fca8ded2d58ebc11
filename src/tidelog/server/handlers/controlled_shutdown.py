"""ControlledShutdown (key 7): a stopping broker asks the controller to move its leadership
away; the answer lists the partitions it still leads (Kafka's doControlledShutdown). Only
the active controller answers; others say NOT_CONTROLLER, as does a broker outside a
cluster. Needs CLUSTER_ACTION on the cluster (brokers only)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 7
MIN_VERSION = 3
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    pcls = nested(cls, "remaining_partitions")
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=())
    cluster = ctx.broker.cluster
    if cluster is None or not cluster.controller.is_active:
        return make(cls, error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=())
    error, remaining = await cluster.controller.controlled_shutdown(
        int(request.broker_id), int(request.broker_epoch)
    )
    parts = tuple(make(pcls, topic_name=tp.topic, partition_index=tp.partition) for tp in remaining)
    return make(cls, error_code=error, remaining_partitions=parts)
