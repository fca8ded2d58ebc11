"""DescribeProducers (key 61): the idempotent producers a partition remembers (Kafka's
``kafka-transactions.sh describe-producers``): id, epoch, last sequence and timestamp."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.storage.producer_state import ProducerStateEntry
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import ApiError, to_error
from ..security import AclOperation, ResourceType

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def _producers(cls: Any, active: list[tuple[int, ProducerStateEntry]]) -> tuple[Any, ...]:
    out = []
    for pid, entry in active:
        txn = entry.current_txn_first_offset
        out.append(
            make(
                cls,
                producer_id=pid,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=-1 if txn is None else txn,
            )
        )
    return tuple(out)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    scls = nested(pcls, "active_producers")
    rm = ctx.broker.replica_manager
    topics = []
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            try:
                if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name):
                    raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                active = rm.active_producer_state(TopicPartition(t.name, index))
                parts.append(
                    make(
                        pcls,
                        partition_index=index,
                        error_code=0,
                        error_message=None,
                        active_producers=_producers(scls, active),
                    )
                )
            except Exception as exc:
                code, msg = to_error(exc)
                parts.append(
                    make(
                        pcls,
                        partition_index=index,
                        error_code=code,
                        error_message=msg,
                        active_producers=(),
                    )
                )
        topics.append(make(tcls, name=t.name, partitions=tuple(parts)))
    return make(cls, throttle_time=0, topics=tuple(topics))
