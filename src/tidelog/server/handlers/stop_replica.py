"""StopReplica (key 5): the controller tells this broker to stop replicating partitions and,
with ``delete_partition``, to delete them (topic deletion, reassignment away from it):
Kafka's KafkaApis.handleStopReplicaRequest -> ReplicaManager.stopReplicas.

Fenced like LeaderAndIsr (CLUSTER_ACTION, broker epoch, controller epoch); a partition whose
leader epoch in the request is older than ours answers FENCED_LEADER_EPOCH and stays (-2,
Kafka's EpochDuringDelete, always applies; -1 names no epoch). Versions 3-4."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..coordinator.leadership import on_resignation
from .controller_requests import controller_request_error

API_KEY = 5
MIN_VERSION = 3
MAX_VERSION = 4


def _partitions(request: Any) -> dict[TopicPartition, tuple[int, bool]]:
    return {
        TopicPartition(str(t.topic_name), int(p.partition_index)): (
            int(p.leader_epoch), bool(p.delete_partition))
        for t in request.topic_states for p in t.partition_states
    }  # fmt: skip


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    pcls = nested(cls, "partition_errors")
    partitions = _partitions(request)
    error = controller_request_error(ctx, int(request.broker_epoch))
    errors: dict[TopicPartition, ErrorCode] = {}
    if error == ErrorCode.NONE:
        # after any LeaderAndIsr still making its logs (Kafka's replicaStateChangeLock); the
        # coordinators unload what is stopped here, even if this request is cancelled
        error, errors = await ctx.broker.replica_manager.apply_stop_replicas(
            int(request.controller_epoch), partitions,
            lambda: on_resignation(ctx.broker, partitions),
        )
    if error != ErrorCode.NONE:  # Kafka answers the top-level error with no partitions
        return make(cls, error_code=error, partition_errors=())
    parts = tuple(
        make(pcls, topic_name=tp.topic, partition_index=tp.partition,
             error_code=errors.get(tp, ErrorCode.NONE))
        for tp in partitions
    )  # fmt: skip
    return make(cls, error_code=ErrorCode.NONE, partition_errors=parts)
