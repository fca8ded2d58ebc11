"""AddPartitionsToTxn (key 24) v0-4. v0-3: one transaction from a producer; v4 (KIP-890):
a batch of transactions from a broker, each either added or, with ``verify_only``, checked
(NONE when the partition is in the transaction, TRANSACTION_ABORTABLE when not). Partition
errors as Kafka's handler: TOPIC_AUTHORIZATION_FAILED / UNKNOWN_TOPIC_OR_PARTITION for the
partitions concerned and OPERATION_NOT_ATTEMPTED for the rest."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.transaction.wiring import replicated, txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 4


def _partitions(topics: Any) -> list[TopicPartition]:
    return [TopicPartition(t.name, int(p)) for t in topics for p in t.partitions]


def _precheck(ctx: RequestContext, tid: str,
              parts: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka's order: transactional id WRITE, then topic WRITE and existence."""
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(parts, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    rm = ctx.broker.replica_manager
    bad: dict[TopicPartition, ErrorCode] = {}
    for tp in parts:
        info = rm.topic(tp.topic)
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, tp.topic):
            bad[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None or not 0 <= tp.partition < info.partitions:
            bad[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not bad:
        return None
    return {tp: bad.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in parts}


async def _one(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Any,
         verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    parts = _partitions(topics)
    errors = _precheck(ctx, tid, parts)
    if errors is not None:
        return errors
    coord = txn_coordinator_for(ctx.broker)
    if verify_only:
        return coord.verify_partitions(tid, pid, epoch, parts)
    err = coord.add_partitions(tid, pid, epoch, parts)
    if err == ErrorCode.NONE:  # answered once the ISR has the new state
        err = await replicated(coord, tid)
    if err == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        err = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(parts, err)


def _topic_results(tcls: Any, errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    pcls = nested(tcls, "results_by_partition")
    by_topic: dict[str, list[Any]] = {}
    for tp, err in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            make(pcls, partition_index=tp.partition, partition_error_code=err))
    return tuple(make(tcls, name=t, results_by_partition=tuple(ps))
                 for t, ps in by_topic.items())


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if ctx.api_version < 4:
        errors = await _one(ctx, request.v3_and_below_transactional_id,
                      int(request.v3_and_below_producer_id),
                      int(request.v3_and_below_producer_epoch),
                      request.v3_and_below_topics, False)
        tcls = nested(cls, "results_by_topic_v3_and_below")
        return make(cls, throttle_time=0, results_by_topic_v3_and_below=_topic_results(tcls, errors))
    # v4 comes from brokers verifying produce requests (Kafka requires CLUSTER_ACTION)
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    results_by_transaction=())
    rcls = nested(cls, "results_by_transaction")
    tcls = nested(rcls, "topic_results")
    results = []
    for t in request.transactions:
        errors = await _one(ctx, t.transactional_id, int(t.producer_id), int(t.producer_epoch),
                      t.topics, bool(t.verify_only))
        results.append(make(rcls, transactional_id=t.transactional_id,
                            topic_results=_topic_results(tcls, errors)))
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE,
                results_by_transaction=tuple(results))
