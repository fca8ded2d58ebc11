"""AddOffsetsToTxn (key 25) v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, so its TxnOffsetCommit records get the transaction's marker."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make
from tidelog.server.coordinator.group.log_store import LogOffsetsStore, offsets_topic_configs
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC
from tidelog.server.coordinator.group.wiring import coordinator_for
from tidelog.server.coordinator.transaction.wiring import replicated, txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType
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
    elif not await _offsets_topic_ready(ctx):  # the partition must exist to take the marker
        err = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        gc = coordinator_for(ctx.broker)
        tp = TopicPartition(OFFSETS_TOPIC, gc.manager.partition_for(group))
        coord = txn_coordinator_for(ctx.broker)
        err = coord.add_partitions(
            tid, int(request.producer_id), int(request.producer_epoch), [tp])
        if err == ErrorCode.NONE:
            err = await replicated(coord, tid)
        if err == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
            err = ErrorCode.INVALID_PRODUCER_EPOCH
    return make(cls, throttle_time=0, error_code=err)


async def _offsets_topic_ready(ctx: RequestContext) -> bool:
    """``__consumer_offsets`` exists, created off the event loop if it did not."""
    store = coordinator_for(ctx.broker).manager.store
    if not isinstance(store, LogOffsetsStore):
        return True
    cfg = store.config
    return await ctx.broker.admin_manager.ensure_internal_topic(
        OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, offsets_topic_configs(cfg),
        int(ctx.broker.config.values["offsets.topic.replication.factor"]),
    )
