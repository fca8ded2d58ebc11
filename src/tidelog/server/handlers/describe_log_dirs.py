"""DescribeLogDirs (key 35): per log dir, each hosted partition's size (offset lag is 0 on a
single node), and a partition being moved (AlterReplicaLogDirs) also in its target dir with
is_future_key and its lag behind the current log; total/usable bytes of the dir's file system (v4); a log dir
that failed answers KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4


def _wanted(request: Any) -> dict[str, set[int]] | None:
    if request.topics is None:
        return None
    return {t.topic: set(t.partitions) for t in request.topics}


def _fs_bytes(d: Path) -> tuple[int, int]:
    try:
        st = os.statvfs(d)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # v3+ carry it; older get no dirs
        return make(cls, throttle_time=0, error_code=code, results=())
    rcls = nested(cls, "results")
    tcls = nested(rcls, "topics")
    pcls = nested(tcls, "partitions")
    wanted = _wanted(request)
    rm = ctx.broker.replica_manager
    partitions = [TopicPartition(info.name, p) for info in rm.topics()
                  for p in range(info.partitions)
                  if wanted is None or p in wanted.get(info.name, set())]
    mover = ctx.broker.log_dir_mover
    futures = {tp: future for tp, future in dict(mover.moves.futures if mover else {}).items()
               if wanted is None or tp.partition in wanted.get(tp.topic, set())}
    results = []
    for d in rm.describe_log_dirs(partitions, futures):
        # An offline dir answers KAFKA_STORAGE_ERROR and no partitions (Kafka's LogManager).
        err = ErrorCode.KAFKA_STORAGE_ERROR if d.offline else 0
        total, usable = (-1, -1) if err else _fs_bytes(d.path)
        topics = tuple(make(tcls, name=n, partitions=tuple(
            make(pcls, partition_index=r.partition, partition_size=r.size,
                 offset_lag=r.offset_lag, is_future_key=r.is_future) for r in replicas))
            for n, replicas in d.topics.items())
        results.append(make(rcls, error_code=err, log_dir=str(d.path), total_bytes=total,
                            usable_bytes=usable, topics=topics))
    return make(cls, throttle_time=0, error_code=0, results=tuple(results))
