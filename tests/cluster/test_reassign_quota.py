"""The replication throttles' arithmetic (Kafka's ReplicationQuotaManagerTest): which replicas
a topic's ``*.replication.throttled.replicas`` names on a broker, the sampled byte rate
against the broker's rate (read live), and when a replica is held back."""

from __future__ import annotations

from tidelog.server.replication.quota import (
    ReplicationQuotaManager,
    replication_quotas,
    throttled_partitions,
)
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition


def test_throttled_partitions_of_this_broker() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1", " 3 : 1 "], 1) == {0, 2, 3}
    assert throttled_partitions(["0:1", "1:2"], 3) == set()
    assert throttled_partitions(["*"], 7) is None
    assert throttled_partitions([], 1) == set()


def _manager(lists: dict[str, list[str]], rate: list[float], clock: ManualClock) -> ReplicationQuotaManager:
    return ReplicationQuotaManager(1, lambda: rate[0], lambda tp: lists.get(tp.topic), 11, 1000, clock)


def test_rate_over_windows_and_live_bound() -> None:
    clock = ManualClock()
    rate = [100.0]
    lists = {"t": ["0:1"], "all": ["*"]}
    q = _manager(lists, rate, clock)
    assert q.is_throttled(TopicPartition("t", 0)) and not q.is_throttled(TopicPartition("t", 1))
    assert q.is_throttled(TopicPartition("all", 5)) and not q.is_throttled(TopicPartition("other", 0))
    # Kafka's Rate: at first the elapsed time counts as (windows - 1) full windows (10 s)
    q.record(1000)
    assert q.byte_rate() == 100.0 and not q.is_quota_exceeded()
    q.record(1)
    assert q.is_quota_exceeded()
    assert q.should_throttle(TopicPartition("t", 0), in_sync=False)
    # an in-sync replica and an unthrottled partition go on regardless
    assert not q.should_throttle(TopicPartition("t", 0), in_sync=True)
    assert not q.should_throttle(TopicPartition("t", 1), in_sync=False)
    assert q.throttled_rounds == 1
    # the bound is read live (a dynamic config change applies at once)
    rate[0] = 1000.0
    assert not q.is_quota_exceeded()
    rate[0] = 100.0
    # the samples expire after 11 windows: the rate falls back to zero
    clock.advance(12_000)
    assert q.byte_rate() == 0.0 and not q.is_quota_exceeded()
    # a topic's list changed: parsed again
    lists["t"] = ["1:1"]
    assert q.is_throttled(TopicPartition("t", 1)) and not q.is_throttled(TopicPartition("t", 0))


def test_unlimited_by_default_and_rates_from_config() -> None:
    values: dict[str, object] = {"replication.quota.window.num": 2, "replication.quota.window.size.seconds": 1}
    clock = ManualClock()
    quotas = replication_quotas(1, lambda: values, lambda _tp: ["*"], lambda _tp: None, clock)
    tp = TopicPartition("t", 0)
    quotas.leader.record(10**12)
    assert not quotas.leader.is_quota_exceeded()  # no rate set: Long.MaxValue
    assert not quotas.follower.is_throttled(tp)
    values["leader.replication.throttled.rate"] = 1000
    assert quotas.leader.is_quota_exceeded() and quotas.leader.window_num == 2
