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
    rm = ctx.broker.replica_manager
    wanted = _wanted(request)
    by_dir: dict[Path, dict[str, list[Any]]] = {d.resolve(): {} for d in ctx.broker.config.log_dirs}
    for info in rm.topics():
        for p in range(info.partitions):
            if wanted is not None and p not in wanted.get(info.name, set()):
                continue
            lg = rm.logs.get_log(_tp(info.name, p))
            if lg is None:
                continue
            parent = Path(lg.dir).resolve().parent
            part = make(
                pcls,
                partition_index=p,
                partition_size=lg.size_in_bytes,
                offset_lag=0,
                is_future_key=False,
            )
            by_dir.setdefault(parent, {}).setdefault(info.name, []).append(part)
    mover = ctx.broker.log_dir_mover
    for tp, future in dict(mover.moves.futures if mover is not None else {}).items():
        if wanted is not None and tp.partition not in wanted.get(tp.topic, set()):
            continue
        current = rm.logs.get_log(tp)
        lag = max(0, current.log_end_offset - future.log_end_offset) if current else 0
        part = make(pcls, partition_index=tp.partition, partition_size=future.size_in_bytes,
                    offset_lag=lag, is_future_key=True)
        parent = Path(future.dir).resolve().parent
        by_dir.setdefault(parent, {}).setdefault(tp.topic, []).append(part)
    offline = _offline_dirs(rm)
    results = []
    for d, topics in by_dir.items():
        # An offline dir answers KAFKA_STORAGE_ERROR and no partitions (Kafka's LogManager).
        err = ErrorCode.KAFKA_STORAGE_ERROR if d in offline else 0
        total, usable = (-1, -1) if err else _fs_bytes(d)
        results.append(
            make(
                rcls,
                error_code=err,
                log_dir=str(d),
                total_bytes=total,
                usable_bytes=usable,
                topics=tuple(make(tcls, name=n, partitions=tuple(ps)) for n, ps in topics.items()),
            )
        )
    return make(cls, throttle_time=0, error_code=0, results=tuple(results))


def _offline_dirs(rm: Any) -> set[Path]:
    channel = getattr(rm.logs, "failure_channel", None)
    if channel is None:
        return set()
    return {Path(p).resolve() for p in channel.offline_log_dirs()}


def _tp(topic: str, partition: int) -> Any:
    from tidelog.util.topic_partition import TopicPartition

    return TopicPartition(topic, partition)
