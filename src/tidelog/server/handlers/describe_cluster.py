"""DescribeCluster (key 60): this broker, also the controller."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    b = ctx.broker
    bcls = nested(cls, "brokers")
    return make(
        cls,
        throttle_time=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=b.replica_manager.cluster_id,
        controller_id=b.node_id,
        brokers=(
            make(
                bcls, broker_id=b.node_id, host=b.advertised_host, port=b.advertised_port, rack=None
            ),
        ),
        cluster_authorized_operations=-2147483648,
    )
