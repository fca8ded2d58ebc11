"""CreateTopics (key 19): partitions/configs/validate_only; replication factor must be 1 or
-1 (broker default) on a single node."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from .. import topic_admin
from ..context import RequestContext
from ..errors import ApiError, to_error
from ..security import AclOperation, ResourceType

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def _create_one(ctx: RequestContext, t: Any, validate_only: bool) -> dict[str, Any]:
    rm = ctx.broker.replica_manager
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    partitions = t.num_partitions
    if t.assignments:
        if partitions != -1 or t.replication_factor != -1:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set.",
            )
        partitions = len(t.assignments)
    if partitions == -1:
        partitions = int(ctx.broker.config.values["num.partitions"])
    rf = t.replication_factor
    if rf not in (-1, 1):
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication "
            f"factor of {rf} cannot be reached because only 1 broker(s) are registered.",
        )
    # the partitions' files are made off the event loop (topic_admin.py)
    info = await topic_admin.create_topic(
        rm, t.name, partitions, configs, validate_only=validate_only
    )
    return {"topic_id": info.topic_id, "num_partitions": partitions, "replication_factor": 1}


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "topics")
    results = []
    for t in request.topics:
        try:
            # CREATE on the cluster or on the topic, before any validation (Kafka)
            if not (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
                    or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, t.name)):
                raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            kw = await _create_one(ctx, t, bool(request.validate_only))
            results.append(
                make(rcls, name=t.name, error_code=0, error_message=None, configs=None, **kw)
            )
        except Exception as exc:  # every topic gets its own error, Kafka style
            code, msg = to_error(exc)
            results.append(
                make(rcls, name=t.name, error_code=code, error_message=msg, configs=None)
            )
    return make(cls, throttle_time=0, topics=tuple(results))
