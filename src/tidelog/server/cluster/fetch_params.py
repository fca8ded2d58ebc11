"""What a Fetch asks of a partition (Kafka's FetchParams and FetchRequest.PartitionData): who
fetches and how far it may read, the same for every partition of one request, and each
partition's own position. The fetch session's ``CachedPartition`` is a ``PartitionFetchData``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tidelog.storage.log_read import FetchIsolation


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """A consumer's metadata at Fetch v11+ (KIP-392): it may read from any replica, and
    names its rack (``client.rack``; None or empty: none)."""

    rack_id: str | None
    listener_name: str | None


@dataclass(frozen=True, slots=True)
class FetchParams:
    """Kafka's FetchParams. A follower (``replica_id`` >= 0, its broker epoch
    ``replica_epoch``) reads to the log end and only from the leader; a consumer reads to the
    HW or LSO, from the leader unless it sent ``client_metadata``."""

    replica_id: int
    replica_epoch: int
    isolation: FetchIsolation
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    client_metadata: ClientMetadata | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        return self.replica_id >= 0 or self.client_metadata is None


def isolation_of(read_committed: bool, follower: bool) -> FetchIsolation:
    """Kafka's FetchIsolation.of: a follower reads to the log end, a consumer to the LSO
    (read_committed) or the HW."""
    if follower:
        return FetchIsolation.LOG_END
    return FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK


class PartitionFetchData(Protocol):
    """One partition of a Fetch: where to read, its size limit, the leader epoch the fetcher
    knows (-1: not checked), and a follower's own log start offset and last fetched epoch."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    fetcher_log_start_offset: int
    last_fetched_epoch: int
