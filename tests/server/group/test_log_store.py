"""The coordinator over the broker's real logs: __consumer_offsets is created compacted,
commits land in Kafka's format and survive a restart (loaded up to the log end)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidelog.config.broker_config import BrokerConfig
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.coordinator import CommitEntry, GroupCoordinator
from tidelog.server.coordinator.group.log_store import LogOffsetsStore
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC, partition_for
from tidelog.server.coordinator.timer import CoordinatorTimer
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

CFG = GroupConfig(offsets_topic_num_partitions=3)
TP = TopicPartition("t", 0)


def _rm(log_dir: Path, clock: ManualClock) -> ReplicaManager:
    rm = ReplicaManager(BrokerConfig({"log.dirs": str(log_dir)}), clock)
    rm.startup()
    return rm


def _coordinator(rm: ReplicaManager, clock: ManualClock) -> GroupCoordinator:
    coord = GroupCoordinator(
        CFG, clock=clock, scheduler=ManualScheduler(clock), store=LogOffsetsStore(rm, CFG)
    )
    coord.startup()
    return coord


def test_offsets_survive_restart_on_real_logs(tmp_path: Path) -> None:
    clock = ManualClock()
    rm = _rm(tmp_path, clock)
    assert rm.topic(OFFSETS_TOPIC) is None  # created lazily, on the first write
    coord = _coordinator(rm, clock)
    for o in (3, 4, 5):
        assert coord.commit_offsets("g", {TP: CommitEntry(o, 2, "m")}) == {TP: 0}
    info = rm.topic(OFFSETS_TOPIC)
    assert info is not None and info.partitions == 3
    assert info.configs["cleanup.policy"] == "compact"
    log = rm.get_log(TopicPartition(OFFSETS_TOPIC, partition_for("g", 3)))
    assert log.log_end_offset == 3
    coord.shutdown()
    rm.shutdown()

    rm2 = _rm(tmp_path, clock)
    coord2 = _coordinator(rm2, clock)
    err, got = coord2.fetch_offsets("g", [TP])
    assert err == 0
    assert (got[TP].offset, got[TP].leader_epoch, got[TP].metadata) == (5, 2, "m")
    rm2.shutdown()


def test_loop_scheduler_runs_and_cancels_on_the_loop() -> None:
    async def scenario() -> list[str]:
        sched = CoordinatorTimer(asyncio.get_running_loop())
        ran: list[str] = []
        done = asyncio.Event()
        sched.schedule("a", lambda: ran.append("a"), 0)
        cancelled = sched.schedule("b", lambda: ran.append("b"), 0)
        cancelled.cancel()
        sched.schedule("c", lambda: (ran.append("c"), done.set()), 1)
        await asyncio.wait_for(done.wait(), 5)
        sched.shutdown()
        late = sched.schedule("d", lambda: ran.append("d"), 0)
        assert late.cancelled
        return ran

    assert asyncio.run(scenario()) == ["a", "c"]


def test_consumer_offsets_is_compacted_by_the_cleaner(tmp_path: Path) -> None:
    """Repeated commits of one key roll small segments; the cleaner keeps the last value of
    every key (and tombstones until their horizon), and a restart still loads them."""
    clock = ManualClock()
    cfg = GroupConfig(offsets_topic_num_partitions=1, offsets_topic_segment_bytes=1024)
    rm = _rm(tmp_path, clock)
    coord = GroupCoordinator(
        cfg, clock=clock, scheduler=ManualScheduler(clock), store=LogOffsetsStore(rm, cfg)
    )
    coord.startup()
    tps = [TopicPartition("t", p) for p in range(3)]
    for o in range(200):
        coord.commit_offsets("g", {tp: CommitEntry(o * 10 + tp.partition) for tp in tps})
    coord.commit_offsets("gone", {TP: CommitEntry(1)})
    assert coord.delete_groups(["gone"]) == {"gone": 0}
    log = rm.get_log(TopicPartition(OFFSETS_TOPIC, 0))
    before_segments, before_size = len(list(log.segments.values())), log.size_in_bytes
    assert before_segments > 10
    cleaner = rm.logs.cleaner
    assert cleaner is not None
    assert cleaner.clean_once()
    assert log.size_in_bytes < before_size / 5
    records = [r for seg in log.segments.values() for b in seg.log.batches() for r in b]
    keys = [r.key for r in records]
    # the cleaned part holds each key once (the active segment may repeat a few)
    assert len(keys) < 40 and len(set(keys)) >= 3
    coord.shutdown()
    rm.shutdown()

    rm2 = _rm(tmp_path, clock)
    coord2 = GroupCoordinator(
        cfg, clock=clock, scheduler=ManualScheduler(clock), store=LogOffsetsStore(rm2, cfg)
    )
    coord2.startup()
    _, got = coord2.fetch_offsets("g", tps)
    assert [got[tp].offset for tp in tps] == [1990, 1991, 1992]
    assert "gone" not in coord2.groups
    rm2.shutdown()
