"""AddOffsetsToTxn (key 25) v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, so its TxnOffsetCommit records get the transaction's marker."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.group.records import OFFSETS_TOPIC
from tidelog.server.group.wiring import coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
from tidelog.server.txn.wiring import txn_coordinator_for
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tid, group = request.transactional_id, request.group_id
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        err = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group):
        err = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        gc = coordinator_for(ctx.broker)
        ensure = getattr(gc.manager.store, "_ensure_topic", None)
        if ensure is not None:
            ensure()  # the partition must exist to take the marker
        tp = TopicPartition(OFFSETS_TOPIC, gc.manager.partition_for(group))
        err = txn_coordinator_for(ctx.broker).add_partitions(
            tid, int(request.producer_id), int(request.producer_epoch), [tp])
        if err == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
            err = ErrorCode.INVALID_PRODUCER_EPOCH
    return make(cls, throttle_time=0, error_code=err)
