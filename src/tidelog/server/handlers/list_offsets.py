"""ListOffsets (key 2): earliest (-2), latest (-1, the HW or LSO), max timestamp (-3, v7+),
earliest local (-4, v8+: the log start, there is no remote tier), latest tiered (-5, v9+:
-1, nothing is tiered), or the first offset whose timestamp is >= the given one. A special
timestamp older than its version is UNSUPPORTED_VERSION for that partition, as in Kafka.
v10's timeout only bounds remote-storage reads, which never happen here."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..cluster.fetch_params import isolation_of
from ..context import RequestContext
from ..errors import to_error
from ..security import AclOperation, ResourceType

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 10
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# the first version that may ask for each special timestamp (Kafka's ReplicaManager)
TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, -4: 8, -5: 9}


def _lookup(
    ctx: RequestContext, tp: TopicPartition, ts: int, committed: bool, current_epoch: int,
    follower: bool,
) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch). Only the leader answers; a follower (replica_id
    >= 0) reads to the log end, a consumer to the HW or LSO (Kafka's fetchOffsetForTimestamp)."""
    return ctx.broker.replica_manager.fetch_offset_for_timestamp(
        tp, ts, isolation_of(committed, follower), current_epoch)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for t in request.topics:
        parts = []
        described = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            if not described:  # before existence, as Kafka's handleListOffsetRequest
                parts.append(make(pcls, partition_index=p.partition_index, timestamp=-1,
                                  offset=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                if ctx.api_version < TIMESTAMP_MIN_VERSION.get(p.timestamp, 0):
                    raise ValueError(f"timestamp {p.timestamp} needs a newer version")
                ts, off, epoch = _lookup(
                    ctx, TopicPartition(t.name, p.partition_index), p.timestamp, committed,
                    int(getattr(p, "current_leader_epoch", -1)),
                    int(getattr(request, "replica_id", -1)) >= 0,
                )
                parts.append(
                    make(
                        pcls,
                        partition_index=p.partition_index,
                        error_code=0,
                        timestamp=ts,
                        offset=off,
                        leader_epoch=epoch,
                    )
                )
            except ValueError:
                parts.append(
                    make(
                        pcls,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNSUPPORTED_VERSION,
                        timestamp=-1,
                        offset=-1,
                    )
                )
            except Exception as exc:
                code, _ = to_error(exc)
                parts.append(
                    make(
                        pcls,
                        partition_index=p.partition_index,
                        error_code=code,
                        timestamp=-1,
                        offset=-1,
                    )
                )
        topics.append(make(tcls, name=t.name, partitions=tuple(parts)))
    return make(cls, throttle_time=0, topics=tuple(topics))
