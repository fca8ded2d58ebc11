"""DescribeTransactions (key 65) v0 (KIP-664): state, producer id/epoch, timeout, start
time and partitions of each transactional id the principal may DESCRIBE."""

from __future__ import annotations

import datetime
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.transaction.wiring import txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType

from ..context import RequestContext

# kio writes this int64 as a datetime; an error answer carries the schema default 0, an
# Empty transaction Kafka's -1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _time(ms: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=ms)


API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def _state(ctx: RequestContext, scls: Any, tid: str) -> Any:
    dcls = nested(scls, "topics")
    empty = dict(transaction_state="", transaction_timeout=0, transaction_start_time=_time(0),
                 producer_id=-1, producer_epoch=-1, topics=())
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        return make(scls, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=tid, **empty)
    err, meta = txn_coordinator_for(ctx.broker).describe(tid)
    if meta is None:
        return make(scls, error_code=err, transactional_id=tid, **empty)
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(meta.partitions):
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
    return make(scls, error_code=ErrorCode.NONE, transactional_id=tid,
                transaction_state=meta.state.kafka_name,
                transaction_timeout=meta.txn_timeout_ms,
                transaction_start_time=_time(meta.txn_start_timestamp),
                producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                topics=tuple(make(dcls, topic=t, partitions=tuple(ps))
                             for t, ps in by_topic.items()))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    scls = nested(cls, "transaction_states")
    return make(cls, throttle_time=0, transaction_states=tuple(
        _state(ctx, scls, tid) for tid in request.transactional_ids))
