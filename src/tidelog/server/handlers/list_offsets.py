"""ListOffsets (key 2): earliest (-2, the log start: the remote start of a tiered topic),
latest (-1, the HW or LSO), max timestamp (-3, v7+), earliest local (-4, v8+: the first
offset on local disk), latest tiered (-5, v9+: the highest offset copied to remote storage,
-1 when none or not tiered), earliest pending upload (-6, v11+, KIP-1023: the first offset not
yet copied, -1 when not tiered), or the first offset whose timestamp is >= the given one.
A special timestamp older than its version is UNSUPPORTED_VERSION for that partition, as in
Kafka. A timestamp of a tiered partition is looked up in remote storage first (bounded
by remote.list.offsets.request.timeout.ms), then locally."""

from __future__ import annotations

import asyncio
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.util.topic_partition import TopicPartition

from ..cluster.fetch_params import isolation_of
from ..context import RequestContext
from ..errors import to_error
from ..security import AclOperation, ResourceType

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# the first version that may ask for each special timestamp (Kafka's ReplicaManager)
TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, -4: 8, -5: 9, -6: 11}


def _lookup(
    ctx: RequestContext, tp: TopicPartition, ts: int, committed: bool, current_epoch: int,
    follower: bool,
) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch). Only the leader answers; a follower (replica_id
    >= 0) reads to the log end, a consumer to the HW or LSO (Kafka's fetchOffsetForTimestamp)."""
    return ctx.broker.replica_manager.fetch_offset_for_timestamp(
        tp, ts, isolation_of(committed, follower), current_epoch)


async def _remote_lookup(ctx: RequestContext, tp: TopicPartition, ts: int,
                         current_epoch: int) -> tuple[int, int, int] | None:
    """A timestamp of a tiered partition looked up in remote storage first (Kafka's
    asyncOffsetRead, bounded by remote.list.offsets.request.timeout.ms); None: locally."""
    rlm = ctx.broker.remote_log_manager
    if rlm is None or ts < 0:
        return None
    partition = ctx.broker.replica_manager.partition_or_error(tp, current_epoch)
    if not partition.remote_storage_enabled or partition.topic_id is None or \
            partition.local_log_start_offset <= partition.log_start_offset:
        return None
    tip = TopicIdPartition(partition.topic_id, tp.topic, tp.partition)
    found = await asyncio.wait_for(
        rlm.find_offset_by_timestamp(tip, ts, partition.log_start_offset),
        rlm.config.remote_list_offsets_request_timeout_ms / 1000)
    if found is None or found.offset >= partition.local_log_start_offset:
        return None
    return found.timestamp, found.offset, found.leader_epoch or 0


def _error_response(pcls: Any, partition_index: int, code: int) -> Any:
    """A partition's ListOffsetsPartitionResponse for an error (Kafka's buildErrorResponse):
    no timestamp, no offset."""
    return make(pcls, partition_index=partition_index, error_code=code, timestamp=-1, offset=-1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    committed = getattr(request, "isolation_level", 0) == 1
    follower = int(getattr(request, "replica_id", -1)) >= 0
    topics = []
    for t in request.topics:
        parts = []
        described = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            index = p.partition_index
            if not described:  # before existence, as Kafka's handleListOffsetRequest
                parts.append(_error_response(pcls, index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                if ctx.api_version < TIMESTAMP_MIN_VERSION.get(p.timestamp, 0):
                    raise ValueError(f"timestamp {p.timestamp} needs a newer version")
                tp = TopicPartition(t.name, index)
                current = int(getattr(p, "current_leader_epoch", -1))
                found = await _remote_lookup(ctx, tp, p.timestamp, current)
                ts, off, epoch = found if found is not None else _lookup(
                    ctx, tp, p.timestamp, committed, current, follower)
                parts.append(make(pcls, partition_index=index, error_code=0, timestamp=ts,
                                  offset=off, leader_epoch=epoch))  # fmt: skip
            except ValueError:
                parts.append(_error_response(pcls, index, ErrorCode.UNSUPPORTED_VERSION))
            except Exception as exc:
                parts.append(_error_response(pcls, index, to_error(exc)[0]))
        topics.append(make(tcls, name=t.name, partitions=tuple(parts)))
    return make(cls, throttle_time=0, topics=tuple(topics))
