"""Truncation of a log (Kafka's UnifiedLog.truncateTo / truncateFullyAndStartAt): a follower
cutting its log back to where it agrees with its leader, producer state, leader epochs and the
transaction index following; kept beside log.py as retention is in log_retention.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .leader_epoch import EpochEntry
from .loader import open_segment, rebuild_producer_state
from .log_files import delete_all
from .segment import DELETED_FILE_SUFFIX, LogOffsetMetadata

if TYPE_CHECKING:
    from .log import Log


def truncate_to(lg: Log, target: int) -> bool:
    """Follower truncation (#83-#86); False if target >= LEO."""
    if target < 0:
        raise ValueError(f"Cannot truncate partition {lg.name} to a negative offset")
    with lg._io("truncate"):
        lg._check_open()
        if target >= lg.log_end_offset:
            lg.leader_epoch_cache.truncate_from_end(lg.log_end_offset)
            return False
        first = lg._segments.first_segment_base_offset or 0
        if first > target:
            truncate_fully_and_start_at(lg, target)
            return True
        lg.remove_and_delete_segments(lg._segments.higher_segments(target), "truncation")
        active = lg._segments.active_segment
        active.truncate_to(target)
        lg._end = LogOffsetMetadata(target, active.base_offset, active.size)
        lg._log_start_offset = min(lg._log_start_offset, target)
        lg._recovery_point = min(lg._recovery_point, target)
        lg._set_hw(min(lg._hw, target))
        rebuild_producer_state(lg._producer_state, lg._segments, lg._log_start_offset,
                               target, lg.clock, reload_from_clean_shutdown=False)
        lg.leader_epoch_cache.truncate_from_end(target)
        return True


def truncate_fully_and_start_at(lg: Log, offset: int) -> None:
    """Delete every segment and start empty at ``offset`` (#85)."""
    with lg._io("truncate"):
        lg._check_open()
        old = lg._segments.values()
        for seg in old:
            lg._segments.remove(seg.base_offset)
        lg._producer_state.truncate_fully_and_start_at(offset)
        lg.leader_epoch_cache.clear_and_flush()
        for seg in old:
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        seg = open_segment(lg._dir, offset, lg._config, lg.clock,
                           preallocate=lg._config.preallocate)
        lg._segments.add(seg)
        lg._end = LogOffsetMetadata(offset, offset, 0)
        lg._log_start_offset = lg._recovery_point = offset
        lg._set_hw(offset)
        if lg.scheduler is not None:
            lg._schedule("delete-file", lambda: delete_all(old),
                         lg._config.file_delete_delay_ms)
        else:
            delete_all(old)


def restore_remote_state(lg: Log, next_offset: int, log_start_offset: int,
                         epochs: list[EpochEntry], producer_snapshot: bytes) -> None:
    """A tiered follower's log rebuilt from remote storage (Kafka's buildRemoteLogAuxState):
    empty at ``next_offset`` (the end of the leader's last remote segment before its local
    start + 1), the leader's log start below it, the leader-epoch cache and the producer
    state from that segment's checkpoint and snapshot."""
    truncate_fully_and_start_at(lg, next_offset)
    with lg._io("restore from remote storage"):
        lg._log_start_offset = min(log_start_offset, next_offset)
        for e in epochs:
            if e.start_offset < next_offset:
                lg.leader_epoch_cache.assign(e.epoch, e.start_offset, flush=False)
        lg.leader_epoch_cache.flush()
        lg._producer_state.reload_from_snapshot(producer_snapshot, next_offset,
                                                lg._log_start_offset, lg.clock.milliseconds())
