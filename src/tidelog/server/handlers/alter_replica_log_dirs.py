"""AlterReplicaLogDirs (key 34): move partitions between this broker's log dirs. A move to
the dir already holding the partition is a no-op (NONE); otherwise a future log in the target
dir catches up and swaps in (server/log_dir_moves.py, storage/replica_alter_log_dirs.py).
A path that is not one of log.dirs is LOG_DIR_NOT_FOUND, an offline one KAFKA_STORAGE_ERROR,
an unknown partition UNKNOWN_TOPIC_OR_PARTITION. Needs ALTER on the cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..log_dir_moves import log_dir_mover
from ..security import AclOperation, ResourceType

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2


def _move(ctx: RequestContext, tp: TopicPartition, target: str) -> ErrorCode:
    rm = ctx.broker.replica_manager
    dirs = {str(Path(d).resolve()): Path(d) for d in rm.live_log_dirs()}
    configured = {str(Path(d).resolve()) for d in ctx.broker.config.log_dirs}
    key = str(Path(target).resolve())
    if key not in configured:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if key not in dirs:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if rm.get_partition(tp) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    mover = log_dir_mover(ctx.broker)
    mover.moves.alter(tp, dirs[key])
    mover.wake()
    return ErrorCode.NONE


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "results")
    pcls = nested(tcls, "partitions")
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    by_topic: dict[str, list[Any]] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = (_move(ctx, TopicPartition(t.name, int(p)), d.path) if allowed
                        else ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                by_topic.setdefault(t.name, []).append(
                    make(pcls, partition_index=p, error_code=code))
    return make(cls, throttle_time=0, results=tuple(
        make(tcls, topic_name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))
