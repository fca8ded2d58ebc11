"""UpdateMetadata (key 6): the controller's view of live brokers and partition states, which
this broker serves in Metadata and uses to find leaders and the controller (Kafka's
KafkaApis.handleUpdateMetadataRequest -> ReplicaManager.maybeUpdateMetadataCache ->
ZkMetadataCache.updateMetadata).

Fenced like LeaderAndIsr (CLUSTER_ACTION, broker epoch); a controller epoch older than the
newest seen is STALE_CONTROLLER_EPOCH and changes nothing. Versions 7-8 (topic ids)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..metadata.cache import UpdateMetadataDelta
from ..metadata.image import BrokerInfo, PartitionRegistration
from .controller_requests import controller_request_error

API_KEY = 6
MIN_VERSION = 7
MAX_VERSION = 8


def delta_of(request: Any) -> UpdateMetadataDelta:
    """The request as the metadata cache takes it."""
    brokers = [
        BrokerInfo(
            int(b.id_),
            {str(e.listener): (str(e.host), int(e.port)) for e in b.endpoints},
            None if b.rack is None else str(b.rack),
        )
        for b in request.live_brokers
    ]
    partitions: dict[TopicPartition, PartitionRegistration] = {}
    topic_ids: dict[str, uuid.UUID] = {}
    for t in request.topic_states:
        name = str(t.topic_name)
        if t.topic_id is not None and t.topic_id.int != 0:
            topic_ids[name] = t.topic_id
        for p in t.partition_states:
            partitions[TopicPartition(name, int(p.partition_index))] = PartitionRegistration(
                replicas=tuple(int(b) for b in p.replicas),
                isr=tuple(int(b) for b in p.isr),
                leader=int(p.leader),
                leader_epoch=int(p.leader_epoch),
                partition_epoch=int(p.zk_version),
                offline_replicas=tuple(int(b) for b in p.offline_replicas),
            )
    return UpdateMetadataDelta(
        int(request.controller_id), int(request.controller_epoch), brokers, partitions, topic_ids
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    error = controller_request_error(ctx, int(request.broker_epoch))
    if error != ErrorCode.NONE:
        return make(cls, error_code=error)
    rm = ctx.broker.replica_manager
    epoch = int(request.controller_epoch)
    if epoch < rm.controller_epoch:
        return make(cls, error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    rm.controller_epoch = epoch
    rm.metadata_cache.update_metadata(delta_of(request))
    return make(cls, error_code=ErrorCode.NONE)
