"""The follower side as the ReplicaManager sees it: Kafka's ReplicaFetcherManager.

``FetcherManager`` is the seam (docs/INTERFACES.md, "Cluster and replication seam"): the
ReplicaManager tells it which partitions to fetch, from which leader, from which offset, after
a LeaderAndIsr made this broker their follower, and which to stop fetching (became leader,
StopReplica, deletion). One-broker mode uses :class:`NoFetchers`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tidelog.util.java_hash import java_abs, java_string_hash, to_int32
from tidelog.util.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """Where a follower starts fetching a partition (Kafka's InitialFetchState): the leader's
    broker id, the leader epoch of the LeaderAndIsr that made us follower, our log end offset,
    and the topic id (Fetch v13+ names topics by id)."""

    leader_id: int
    leader_epoch: int
    fetch_offset: int
    topic_id: uuid.UUID | None = None


class FetcherManager(Protocol):
    def add_fetcher_for_partitions(
        self, states: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        """Start (or move) fetching each partition from its leader; a partition already
        fetched from another leader or at another epoch is moved."""

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (no-op for partitions not fetched)."""


class NoFetchers:
    """One-broker mode: there is never a leader to fetch from."""

    def add_fetcher_for_partitions(
        self, states: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        if states:
            raise RuntimeError("a one-broker cluster has no leaders to fetch from")

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        return None


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId: ``Utils.abs(31 * topic.hashCode + partition) % numFetchers``."""
    return java_abs(to_int32(31 * java_string_hash(tp.topic) + tp.partition)) % num_fetchers
