"""DescribeCluster (key 60): the live brokers (with their racks) and the controller from the
metadata image. v1 names the endpoint type (a request for the controller endpoints gets
MISMATCHED_ENDPOINT_TYPE: this listener is a broker's), v2 tells whether each broker is
fenced (a live broker in ZooKeeper mode never is)."""

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
    image = ctx.broker.metadata_cache.image
    if int(getattr(request, "endpoint_type", BROKER_ENDPOINT)) != BROKER_ENDPOINT:
        return make(
            cls,
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted "
            "an endpoint of type CONTROLLER",
            endpoint_type=BROKER_ENDPOINT,
            cluster_id=image.cluster_id,
            controller_id=-1,
            cluster_authorized_operations=OPERATIONS_OMITTED,
        )
    ops = OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        ops = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
    bcls = nested(cls, "brokers")
    brokers = []
    for b in image.brokers.values():
        ep = ctx.endpoint if b.broker_id == ctx.broker.node_id \
            else b.endpoint(ctx.listener_name)
        if ep is not None:  # Kafka lists the brokers with an endpoint on this listener
            brokers.append(make(bcls, broker_id=b.broker_id, host=ep[0], port=ep[1],
                                rack=b.rack, is_fenced=False))
    return make(
        cls,
        throttle_time=0,
        error_code=0,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=tuple(brokers),
        cluster_authorized_operations=ops,
    )
