"""CreateTopics (key 19): partitions, replication factor or an explicit assignment, configs,
validate_only; placed and created by the broker's AdminManager (one broker: every replica
here, so the factor must be 1 or -1)."""

from __future__ import annotations

from typing import Any

from tidelog.config.iceberg_config import canonical_topic_configs
from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms, nested

from ..context import RequestContext
from ..errors import ApiError, to_error
from ..metadata.admin import NewTopic
from ..security import AclOperation, ResourceType

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def _create_one(ctx: RequestContext, t: Any, validate_only: bool,
                      timeout: int) -> dict[str, Any]:
    # Redpanda's redpanda.iceberg.* names are stored as ours
    configs = canonical_topic_configs({c.name: c.value for c in t.configs if c.value is not None})
    assignment = {a.partition_index: tuple(a.broker_ids) for a in t.assignments or ()}
    topic = NewTopic(t.name, t.num_partitions, t.replication_factor, assignment, configs)
    info = await ctx.broker.admin_manager.create_topic(
        topic, validate_only=validate_only, timeout_ms=timeout)
    replicas = info.replicas(0, ctx.broker.node_id) if info.partitions else ()
    return {"topic_id": info.topic_id, "num_partitions": info.partitions,
            "replication_factor": len(replicas)}


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
            kw = await _create_one(ctx, t, bool(request.validate_only),
                                   ms(request.timeout))
            results.append(
                make(rcls, name=t.name, error_code=0, error_message=None, configs=None, **kw)
            )
        except Exception as exc:  # every topic gets its own error, Kafka style
            code, msg = to_error(exc)
            results.append(
                make(rcls, name=t.name, error_code=code, error_message=msg, configs=None)
            )
    return make(cls, throttle_time=0, topics=tuple(results))
