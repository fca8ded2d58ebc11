"""DescribeCluster (key 60): this broker, also the controller. v1 names the endpoint type
(a request for the controller endpoints gets MISMATCHED_ENDPOINT_TYPE: this listener is a
broker's), v2 tells whether each broker is fenced (never, on one broker)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security import ResourceType

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2
OPERATIONS_OMITTED = -2147483648
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    b = ctx.broker
    if int(getattr(request, "endpoint_type", BROKER_ENDPOINT)) != BROKER_ENDPOINT:
        return make(
            cls,
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted "
            "an endpoint of type CONTROLLER",
            endpoint_type=BROKER_ENDPOINT,
            cluster_id=b.replica_manager.cluster_id,
            controller_id=-1,
            cluster_authorized_operations=OPERATIONS_OMITTED,
        )
    ops = OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        ops = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
    bcls = nested(cls, "brokers")
    return make(
        cls,
        throttle_time=0,
        error_code=0,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=b.replica_manager.cluster_id,
        controller_id=b.node_id,
        brokers=(
            make(
                bcls,
                broker_id=b.node_id,
                host=ctx.endpoint[0],
                port=ctx.endpoint[1],
                rack=None,
                is_fenced=False,
            ),
        ),
        cluster_authorized_operations=ops,
    )
