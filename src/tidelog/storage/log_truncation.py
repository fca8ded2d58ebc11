"""A Log's truncation (Kafka's UnifiedLog.truncateTo, truncateFullyAndStartAt,
buildRemoteLogAuxState), kept apart from ``log.py`` so that each stays small.
``LogTruncation`` is a mixin: it works on the state ``Log`` owns (its LocalLog, log start
offset, high watermark, producer state and leader epochs), under the Log's lock."""

from __future__ import annotations

from .leader_epoch import EpochEntry, LeaderEpochFileCache
from .loader import rebuild_producer_state
from .local_log import LocalLog
from .log_io import LogIo
from .producer_state import ProducerStateManager


class LogTruncation:
    _local: LocalLog
    _log_start_offset: int
    high_watermark: int
    _producer_state: ProducerStateManager
    leader_epoch_cache: LeaderEpochFileCache
    state_stamp: int

    @property
    def name(self) -> str:
        raise NotImplementedError  # the Log's

    def _io(self, op: str) -> LogIo:
        raise NotImplementedError  # the Log's

    def _check_open(self) -> None:
        raise NotImplementedError  # the Log's (log_view)

    def _set_hw(self, hw: int) -> None:
        raise NotImplementedError  # the Log's

    def truncate_to(self, target: int) -> bool:
        """Follower truncation (Kafka's UnifiedLog.truncateTo, #83-#86): cut the log back to
        ``target``, producer state, leader epochs and the transaction index following; False
        if target >= LEO. The leader-epoch checkpoint is written on a background thread
        (Kafka's truncateFromEndAsyncFlush): the replica fetcher runs on the event loop, and
        a follower truncates each of its partitions once it has a new leader."""
        if target < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset")
        with self._io("truncate"):
            self._check_open()
            local = self._local
            if target >= local.log_end_offset:
                self.leader_epoch_cache.truncate_from_end(local.log_end_offset,
                                                          flush_later=True)
                return False
            if (local.segments.first_segment_base_offset or 0) > target:
                self.truncate_fully_and_start_at(target)
                return True
            local.truncate_to(target)
            self._log_start_offset = min(self._log_start_offset, target)
            self._set_hw(min(self.high_watermark, target))
            rebuild_producer_state(self._producer_state, local.segments,
                                   self._log_start_offset, target, local.clock,
                                   reload_from_clean_shutdown=False)
            self.leader_epoch_cache.truncate_from_end(target, flush_later=True)
            self.state_stamp += 1
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (#85)."""
        with self._io("truncate"):
            self._check_open()
            self._local.truncate_fully_and_start_at(offset)
            self._producer_state.truncate_fully_and_start_at(offset)
            self.leader_epoch_cache.clear_and_flush()
            self._log_start_offset = offset
            self._set_hw(offset)

    def restore_remote_state(self, next_offset: int, log_start_offset: int,
                             epochs: list[EpochEntry], producer_snapshot: bytes) -> None:
        """A tiered follower's log rebuilt from remote storage (Kafka's
        buildRemoteLogAuxState): empty at ``next_offset`` (the end of the leader's last remote
        segment before its local start + 1), the leader's log start below it, the leader-epoch
        cache and the producer state from that segment's checkpoint and snapshot."""
        self.truncate_fully_and_start_at(next_offset)
        with self._io("restore from remote storage"):
            self._log_start_offset = min(log_start_offset, next_offset)
            for e in epochs:
                if e.start_offset < next_offset:
                    self.leader_epoch_cache.assign(e.epoch, e.start_offset, flush=False)
            self.leader_epoch_cache.flush()
            self._producer_state.reload_from_snapshot(producer_snapshot, next_offset,
                                                      self._log_start_offset,
                                                      self._local.clock.milliseconds())
            self.state_stamp += 1

