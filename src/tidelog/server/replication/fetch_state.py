"""A follower fetcher's partition state (Kafka's PartitionFetchState and
OffsetTruncationState, the case classes of AbstractFetcherThread.scala) and what the
fetcher needs of a partition it follows (the local-log side of ReplicaFetcherThread)."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.storage.log_append import LogAppendInfo

_LOG_OVERHEAD = 12  # base offset (8) + batch length (4)


class FollowerPartition(Protocol):
    """What the fetcher needs of a partition this broker follows (Kafka's Partition and its
    UnifiedLog as ReplicaFetcherThread uses them)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    def latest_epoch(self) -> int | None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """(largest epoch <= ``epoch``, its end offset) in our log, None if unknown."""

    def append_records_to_follower(self, records: bytes) -> LogAppendInfo: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def update_follower_high_watermark(self, high_watermark: int, log_start_offset: int) -> bool:
        """Take the leader's HW (capped at our LEO) and log start; True if our HW moved."""


PartitionLookup = Callable[[TopicPartition], FollowerPartition | None]


class FetchStateKind(enum.Enum):
    FETCHING = "Fetching"
    TRUNCATING = "Truncating"
    RESETTING = "Resetting"  # no usable fetch offset: ask the leader (initOffset < 0)


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """Kafka's PartitionFetchState."""

    topic_id: uuid.UUID | None
    fetch_offset: int
    lag: int | None
    current_leader_epoch: int
    kind: FetchStateKind
    last_fetched_epoch: int | None
    delayed_until: float = 0.0  # loop time before which the partition is not fetched

    def ready_for_fetch(self, now: float) -> bool:
        return self.kind is FetchStateKind.FETCHING and now >= self.delayed_until


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    offset: int
    truncation_completed: bool


def complete_batches_length(records: bytes) -> int:
    """The length of the whole batches at the start of ``records`` (a fetch may end in the
    middle of a batch cut by the partition's byte limit)."""
    pos, end = 0, len(records)
    while end - pos >= _LOG_OVERHEAD:
        size = _LOG_OVERHEAD + int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if size <= _LOG_OVERHEAD or pos + size > end:
            break
        pos += size
    return pos
