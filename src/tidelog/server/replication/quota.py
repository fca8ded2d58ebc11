"""Replication throttles (Kafka's ReplicationQuotaManager and the checks around it).

Two per broker: the leader's, on what it sends to followers (``leader.replication.throttled
.rate``, for the replicas ``leader.replication.throttled.replicas`` names on this broker),
and the follower's, on what its fetchers take (``follower.replication.throttled.rate`` and
``follower.replication.throttled.replicas``). A topic's list is ``partition:broker`` pairs
or ``*`` (every replica of the topic). The bytes of throttled partitions are recorded in a
rate over ``replication.quota.window.num`` samples of ``replication.quota.window.size.seconds``
(the client quotas' sampled rate); while it is above the broker's rate the leader sends
nothing for a throttled partition to a follower outside the ISR
(ReplicaManager.shouldLeaderThrottle) and the follower leaves it out of its Fetch unless it
is caught up (ReplicaFetcherThread.shouldFollowerThrottle). Rates are read live from the
broker's (dynamic) configs, so an AlterConfigs applies at once; the replica lists from the
topic's config as the partition's log has it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tidelog.server.quota.manager import _Rate as SampledRate
from tidelog.util.clock import Clock, SystemClock
from tidelog.util.topic_partition import TopicPartition

ALL_REPLICAS = "*"
UNLIMITED = float(2**63 - 1)
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

# the throttled-replica list of a hosted partition's topic (its log config), None if not hosted
ReplicaList = Callable[[TopicPartition], Sequence[str] | None]


def throttled_partitions(entries: Sequence[str], broker_id: int) -> set[int] | None:
    """Kafka's parseThrottledPartitions: the partitions of this broker a topic's list names;
    None means every partition (``*``)."""
    values = [e.strip() for e in entries if e.strip()]
    if values == [ALL_REPLICAS]:
        return None
    out: set[int] = set()
    for entry in values:
        partition, _, broker = entry.partition(":")
        if broker.strip().isdigit() and int(broker) == broker_id and partition.strip().isdigit():
            out.add(int(partition))
    return out


@dataclass
class ReplicationQuotaManager:
    """One throttle (leader or follower side) of one broker."""

    broker_id: int
    rate: Callable[[], float]  # bytes/s, read live
    replica_list: ReplicaList
    window_num: int = 11
    window_size_ms: int = 1000
    clock: Clock = field(default_factory=SystemClock)
    throttled_bytes: int = 0  # total recorded
    throttled_rounds: int = 0  # partitions held back because the quota was exceeded
    _rate: SampledRate = field(default_factory=SampledRate)
    _parsed: dict[str, tuple[tuple[str, ...], set[int] | None]] = field(default_factory=dict)

    def is_throttled(self, tp: TopicPartition) -> bool:
        """Whether this topic's list names this partition's replica here."""
        entries = self.replica_list(tp)
        if not entries:
            return False
        key = tuple(entries)
        cached = self._parsed.get(tp.topic)
        if cached is None or cached[0] != key:
            cached = self._parsed[tp.topic] = (key, throttled_partitions(key, self.broker_id))
        return cached[1] is None or tp.partition in cached[1]

    def bound(self) -> float:
        return float(self.rate())

    def byte_rate(self) -> float:
        """Kafka's byte-rate metric (LeaderReplication / FollowerReplication)."""
        now = self.clock.milliseconds()
        self._rate.purge(now, self.window_size_ms, self.window_num)
        return self._rate.per_second(now, self.window_size_ms, self.window_num)

    def is_quota_exceeded(self) -> bool:
        bound = self.bound()
        return bound < UNLIMITED and self.byte_rate() > bound

    def record(self, nbytes: int) -> None:
        if nbytes > 0:
            self.throttled_bytes += nbytes
            self._rate.record(float(nbytes), self.clock.milliseconds(), self.window_size_ms,
                              self.window_num)  # fmt: skip

    def should_throttle(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a replica outside the ISR
        (a follower not caught up) of a throttled partition, while over the quota."""
        held = not in_sync and self.is_throttled(tp) and self.is_quota_exceeded()
        if held:
            self.throttled_rounds += 1
        return held


@dataclass(frozen=True)
class ReplicationQuotas:
    leader: ReplicationQuotaManager
    follower: ReplicationQuotaManager


def replication_quotas(
    broker_id: int,
    values: Callable[[], dict[str, object]],
    leader_list: ReplicaList,
    follower_list: ReplicaList,
    clock: Clock | None = None,
) -> ReplicationQuotas:
    """Both throttles of a broker; ``values`` gives the broker's current config values."""
    config = values()
    num = int(str(config.get("replication.quota.window.num", 11)))
    size_ms = int(str(config.get("replication.quota.window.size.seconds", 1))) * 1000
    used = clock or SystemClock()

    def rate(key: str) -> Callable[[], float]:
        return lambda: float(str(values().get(key, UNLIMITED)))

    return ReplicationQuotas(
        ReplicationQuotaManager(broker_id, rate(LEADER_RATE), leader_list, num, size_ms, used),
        ReplicationQuotaManager(broker_id, rate(FOLLOWER_RATE), follower_list, num, size_ms, used),
    )
