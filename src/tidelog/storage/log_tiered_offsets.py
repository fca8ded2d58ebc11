"""ListOffsets' tiered specials of a log with remote storage (Kafka's
UnifiedLog.fetchOffsetByTimestamp for EARLIEST_LOCAL, LATEST_TIERED and, KIP-1023,
EARLIEST_PENDING_UPLOAD), from the offsets the log keeps: the log start (the remote start),
the local log start and the highest offset copied to remote storage."""

from __future__ import annotations

from typing import Protocol

from .file_records import TimestampAndOffset
from .leader_epoch import LeaderEpochFileCache

EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1


class TieredLog(Protocol):
    """The offsets of a log that the tiered specials answer from (a Log)."""

    @property
    def remote_log_enabled(self) -> bool: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def local_log_start_offset(self) -> int: ...

    @property
    def highest_offset_in_remote_storage(self) -> int: ...

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache: ...


def tiered_offset(lg: TieredLog, timestamp: int) -> TimestampAndOffset | None:
    """The answer of a tiered special for ``lg`` (-6 of a log not tiered: none, as Kafka);
    None for any other timestamp or a log not tiered."""
    if not lg.remote_log_enabled:
        if timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
        return None
    return tiered_offset_of(timestamp, log_start_offset=lg.log_start_offset,
                            local_log_start_offset=lg.local_log_start_offset,
                            highest_remote_offset=lg.highest_offset_in_remote_storage,
                            epochs=lg.leader_epoch_cache)


def tiered_offset_of(timestamp: int, *, log_start_offset: int, local_log_start_offset: int,
                  highest_remote_offset: int, epochs: LeaderEpochFileCache
                  ) -> TimestampAndOffset | None:
    """The answer for a tiered special ``timestamp``; None for any other timestamp."""
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, local_log_start_offset,
                                  epochs.epoch_for_offset(local_log_start_offset))
    if timestamp == LATEST_TIERED_TIMESTAMP:
        epoch = epochs.epoch_for_offset(highest_remote_offset) if highest_remote_offset >= 0 \
            else NO_PARTITION_LEADER_EPOCH
        return TimestampAndOffset(NO_TIMESTAMP, highest_remote_offset, epoch)
    if timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
        if highest_remote_offset == -1:
            if local_log_start_offset != log_start_offset:  # copies not known here yet
                return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
            first = epochs.earliest_entry()
            epoch = first.epoch if first is not None and \
                first.start_offset <= log_start_offset else None
            return TimestampAndOffset(NO_TIMESTAMP, log_start_offset, epoch)
        pending = max(highest_remote_offset + 1, log_start_offset)
        return TimestampAndOffset(NO_TIMESTAMP, pending, epochs.epoch_for_offset(pending))
    return None
