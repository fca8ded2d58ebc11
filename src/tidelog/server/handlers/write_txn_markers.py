"""WriteTxnMarkers (key 27, v1): a transaction coordinator on another broker asks this
partition leader to append COMMIT / ABORT markers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest). Each marker is appended as the coordinator
(acks=all); a ``__consumer_offsets`` partition then applies or drops the transaction's
pending offsets once the ISR has the marker; the answer waits until the ISR has every marker
appended.
CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.group.txn_offsets import complete_txn_offsets
from tidelog.server.coordinator.transaction.markers import control_batch
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import ApiError
from ..security import AclOperation, ResourceType

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1
REPLICATION_TIMEOUT_MS = 30_000

Errors = dict[tuple[int, TopicPartition], ErrorCode]


def _append(ctx: RequestContext, marker: Any, tp: TopicPartition) -> tuple[ErrorCode, int]:
    """(error, offset after the marker)."""
    rm = ctx.broker.replica_manager
    commit = bool(marker.transaction_result)
    batch = control_batch(int(marker.producer_id), int(marker.producer_epoch),
                          int(marker.coordinator_epoch), commit, ctx.broker.clock.milliseconds())
    try:
        info = rm.append(tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR)
    except ApiError as exc:
        return exc.code, -1
    except Exception:
        return ErrorCode.KAFKA_STORAGE_ERROR, -1
    return ErrorCode.NONE, info.last_offset + 1


async def _write(ctx: RequestContext, request: Any) -> Errors:
    errors: Errors = {}
    required: dict[TopicPartition, int] = {}
    for i, marker in enumerate(request.markers):
        for t in marker.topics:
            for p in t.partition_indexes:
                tp = TopicPartition(str(t.name), int(p))
                errors[(i, tp)], end = _append(ctx, marker, tp)
                if end >= 0:
                    required[tp] = max(required.get(tp, 0), end)
    if required:
        replicated = await ctx.broker.replica_manager.wait_replicated(
            required, REPLICATION_TIMEOUT_MS)
        for key, error in errors.items():
            if error == ErrorCode.NONE:
                errors[key] = replicated.get(key[1], ErrorCode.NONE)
    # a replicated marker on __consumer_offsets applies or drops the transaction's pending
    # offsets (Kafka's onTransactionCompleted, in the append's callback); one not replicated
    # leaves them pending: the transaction coordinator writes the marker again
    for (i, tp), error in errors.items():
        if tp.topic == OFFSETS_TOPIC and error == ErrorCode.NONE:
            marker = request.markers[i]
            complete_txn_offsets(ctx.broker, tp.partition, int(marker.producer_id),
                                 bool(marker.transaction_result))  # fmt: skip
    return errors


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        errors: Errors = {
            (i, TopicPartition(str(t.name), int(p))): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            for i, m in enumerate(request.markers) for t in m.topics for p in t.partition_indexes
        }  # fmt: skip
    else:
        errors = await _write(ctx, request)
    mcls = nested(cls, "markers")
    tcls = nested(mcls, "topics")
    pcls = nested(tcls, "partitions")
    markers = tuple(
        make(mcls, producer_id=m.producer_id, topics=tuple(
            make(tcls, name=t.name, partitions=tuple(
                make(pcls, partition_index=p,
                     error_code=errors[(i, TopicPartition(str(t.name), int(p)))])
                for p in t.partition_indexes))
            for t in m.topics))
        for i, m in enumerate(request.markers))  # fmt: skip
    return make(cls, markers=markers)
