"""What LeaderAndIsr (4), StopReplica (5) and UpdateMetadata (6) share: they come from the
controller, need CLUSTER_ACTION on the cluster, and are refused when they name an older
broker epoch than this broker's registration (Kafka's KafkaApis.isBrokerEpochStale: the
controller still thinks of a previous incarnation of this broker; -1 means "not checked").
Controller epochs are fenced by the ReplicaManager, which remembers the newest one seen."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security import AclOperation, ResourceType


def controller_request_error(ctx: RequestContext, broker_epoch: int) -> ErrorCode:
    """CLUSTER_AUTHORIZATION_FAILED, STALE_BROKER_EPOCH or NONE."""
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    cluster = ctx.broker.cluster
    if cluster is not None and broker_epoch != -1 and broker_epoch < cluster.broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.NONE
