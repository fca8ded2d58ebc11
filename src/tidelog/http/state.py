"""Read-only views of broker state for /metrics, the health checks and the console.

Everything here runs on the broker's event-loop thread (the HTTP listener shares the loop),
like the Kafka handlers, so it sees logs and groups exactly as a Fetch or DescribeGroups
would. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.records import RecordBatch
from tidelog.storage.free_space import DirSpace
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.broker import Broker
    from tidelog.server.coordinator.group.coordinator import GroupCoordinator
    from tidelog.server.coordinator.group.group import GroupMetadata
    from tidelog.server.coordinator.group.records import OffsetAndMetadata
    from tidelog.storage.cleaner.log_cleaner import LogCleaner
    from tidelog.storage.index.abstract_index import AbstractIndex
    from tidelog.storage.log import Log
    from tidelog.storage.manager import LogManager

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12


@dataclass
class SegmentView:
    base_offset: int
    next_offset: int
    size: int
    index_entries: int
    time_index_entries: int
    active: bool
    max_timestamp: int


@dataclass
class PartitionView:
    topic: str
    partition: int
    dir: str
    log_dir: str
    size: int
    num_segments: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    recovery_point: int
    first_dirty_offset: int | None
    compact: bool
    segments: list[SegmentView] = field(default_factory=list)
    # tiered storage: bytes in remote storage; None when the topic is not tiered here
    remote_size: int | None = None


@dataclass
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int
    end_offset: int
    lag: int
    lag_ms: int


def log_manager(broker: Broker) -> LogManager:
    return broker.replica_manager.logs


def iter_logs(broker: Broker) -> Iterator[tuple[TopicPartition, Log]]:
    """(partition, Log) of every online partition of every topic, in topic order."""
    rm = broker.replica_manager
    logs = log_manager(broker)
    for info in sorted(rm.topics(), key=lambda i: i.name):
        for p in range(info.partitions):
            tp = TopicPartition(info.name, p)
            lg = logs.get_log(tp)
            if lg is not None:
                yield tp, lg


def offline_partitions(broker: Broker) -> dict[TopicPartition, Path]:
    return dict(log_manager(broker).offline_partitions())


def offline_log_dirs(broker: Broker) -> dict[str, str]:
    """Offline log dir -> reason, from the LogManager's dirs and its LogDirFailureChannel."""
    logs = log_manager(broker)
    out: dict[str, str] = {}
    for d in logs.dirs:
        if d.offline_reason is not None:
            out[str(d.path)] = str(d.offline_reason)
    for path, reason in logs.failure_channel.offline_log_dirs().items():
        out.setdefault(str(path), str(reason))
    return out


def free_space(broker: Broker) -> list[DirSpace]:
    """Each online log dir's last free-space measure and floor (log.dir.min.free.bytes)."""
    return log_manager(broker).free_space.snapshot()


def degraded_log_dirs(broker: Broker) -> dict[str, dict[str, int]]:
    """Log dirs below their free-space floor: produces to them are refused, reads go on."""
    return {str(d.path): {"free_bytes": d.free, "min_free_bytes": d.floor}
            for d in free_space(broker) if d.below_floor}  # fmt: skip


def all_log_dirs(broker: Broker) -> list[str]:
    return [str(d.path) for d in log_manager(broker).dirs]


def cleaner(broker: Broker) -> LogCleaner | None:
    return log_manager(broker).cleaner


def cleaner_checkpoints(broker: Broker) -> dict[TopicPartition, int]:
    c = cleaner(broker)
    return c.manager.all_cleaner_checkpoints() if c is not None else {}


def _index_entries(index: AbstractIndex, entry_size: int) -> int:
    """Entries without loading a lazily opened index (closed segments' files are trimmed)."""
    if index.is_loaded:
        return int(index.entries)
    try:
        return Path(index.path).stat().st_size // entry_size
    except OSError:
        return 0


def segment_views(lg: Log) -> list[SegmentView]:
    segs = list(lg.segments.values())
    active = lg.active_segment
    out = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else lg.log_end_offset
        out.append(
            SegmentView(
                base_offset=seg.base_offset,
                next_offset=nxt,
                size=seg.size,
                index_entries=_index_entries(seg.offset_index, OFFSET_ENTRY_SIZE),
                time_index_entries=_index_entries(seg.time_index, TIME_ENTRY_SIZE),
                active=seg is active,
                max_timestamp=int(seg.max_timestamp_so_far),
            )
        )
    return out


def partition_view(broker: Broker, tp: TopicPartition, *, with_segments: bool = False) -> (
    PartitionView | None
):
    lg = log_manager(broker).get_log(tp)
    if lg is None:
        return None
    compact = bool(lg.config.compact)
    first_dirty = cleaner_checkpoints(broker).get(tp) if compact else None
    if compact and first_dirty is None:
        first_dirty = lg.log_start_offset
    view = PartitionView(
        topic=tp.topic,
        partition=tp.partition,
        dir=str(lg.dir),
        log_dir=str(Path(lg.dir).parent),
        size=int(lg.size_in_bytes),
        num_segments=int(lg.number_of_segments()),
        log_start_offset=int(lg.log_start_offset),
        high_watermark=int(lg.high_watermark),
        last_stable_offset=int(lg.last_stable_offset),
        log_end_offset=int(lg.log_end_offset),
        recovery_point=int(lg.recovery_point),
        first_dirty_offset=first_dirty,
        compact=compact,
    )
    rlm = broker.remote_log_manager
    if rlm is not None and lg.remote_log_enabled:
        view.remote_size = rlm.remote_log_size_bytes(tp)
    if with_segments:
        view.segments = segment_views(lg)
    return view


def dirty_ratio(tp: TopicPartition, lg: Log, first_dirty: int) -> float:
    """Kafka's cleanable ratio: dirty bytes (cleaner point to the active segment) over the
    log's bytes up to the active segment (as LogToClean computes it)."""
    from tidelog.storage.cleaner.cleaner import LogToClean

    try:
        return float(LogToClean(tp, lg, first_dirty, lg.active_segment.base_offset).cleanable_ratio)
    except Exception:  # a log changing under us: no figure rather than no page
        return 0.0


def producer_id_count(broker: Broker) -> int:
    """Producer ids with state in any partition (Kafka's ReplicaManager ProducerIdCount)."""
    return sum(len(lg.producer_state.producers) for _, lg in iter_logs(broker))


# -- consumer groups -------------------------------------------------------------------------
def coordinator(broker: Broker) -> GroupCoordinator | None:
    return broker.group_coordinator


def groups(broker: Broker) -> dict[str, GroupMetadata]:
    coord = coordinator(broker)
    return dict(coord.groups) if coord is not None else {}


def committed_offsets(broker: Broker) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
    """Committed offsets of classic and KIP-848 consumer groups (share groups commit none:
    their progress is the share-partitions' start offsets)."""
    coord = coordinator(broker)
    if coord is None:
        return {}
    out = {gid: dict(g.offsets) for gid, g in coord.groups.items()}
    for gid, cg in coord.consumer.groups.items():
        out[gid] = dict(cg.offsets)
    return out


def timestamp_at(lg: Log, offset: int) -> int | None:
    """The first timestamp of the batch holding ``offset`` (exact when the batch starts
    there; otherwise a lower bound, so a time lag is never understated)."""
    try:
        info = lg.read(offset, 1, min_one_message=True)
        data = info.records.read() if info.records is not None else b""
    except Exception:
        return None
    if len(data) < 61:
        return None
    return int(RecordBatch(data, 0).base_timestamp)


def group_lags(
    broker: Broker, group_id: str | None = None, *, now_ms: int | None = None, time_lag: bool = True
) -> list[PartitionLag]:
    """Lag per committed partition: HW (what a read_uncommitted consumer can reach) minus
    the committed offset, in messages and (``time_lag``: one small read per lagging
    partition) in time since the first unconsumed record."""
    now = broker.clock.milliseconds() if now_ms is None else now_ms
    rm = broker.replica_manager
    out = []
    for gid, offsets in sorted(committed_offsets(broker).items()):
        if group_id is not None and gid != group_id:
            continue
        for tp, om in sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            lg = rm.logs.get_log(tp)
            if lg is None:
                continue
            end = int(lg.high_watermark)
            committed = int(om.offset)
            lag = max(0, end - committed)
            lag_ms = 0
            if lag > 0 and time_lag:
                ts = timestamp_at(lg, max(committed, int(lg.log_start_offset)))
                lag_ms = max(0, now - ts) if ts is not None and ts >= 0 else 0
            out.append(PartitionLag(gid, tp.topic, tp.partition, committed, end, lag, lag_ms))
    return out


# -- health ----------------------------------------------------------------------------------
def readiness(broker: Broker) -> dict[str, object]:
    """Kafka has no readiness endpoint; these are what a broker needs before serving:
    logs loaded (the listener is bound only after), groups loaded, no offline log dir.

    A dir below its free-space floor does not make the broker unready (it serves reads,
    commits and every other partition): ``degraded`` and ``degraded_log_dirs`` say so."""
    listening = bool(broker.listening and broker.bound_port)
    coord = coordinator(broker)
    loading = sorted(coord.manager.partitions.loading) if coord is not None else []
    offline = offline_log_dirs(broker)
    fatal = broker.fatal_error
    degraded = degraded_log_dirs(broker)
    checks = {
        "logs_loaded": listening,
        "groups_loaded": not loading,
        "log_dirs_online": not offline,
        "no_fatal_error": fatal is None,
    }
    return {
        "ready": all(checks.values()),
        "checks": checks,
        "offline_log_dirs": offline,
        "loading_offsets_partitions": loading,
        "fatal_error": fatal,
        "degraded": bool(degraded),
        "degraded_log_dirs": degraded,
    }
